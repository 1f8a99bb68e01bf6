#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine, builds chainlet with its tests, and runs them all.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
ctest --test-dir build --output-on-failure -j2
