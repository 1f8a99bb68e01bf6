#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine (packages, including the Fashion-MNIST data set), builds the
# LeNet5 example and trains it: progress per epoch, test accuracy, and a checksum at the end.
# Arguments are passed to the example (see build/examples/lenet5 --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build --target lenet5
exec build/examples/lenet5 "$@"
