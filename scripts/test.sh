#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine, builds chainlet with its tests, and runs them all.
# install-deps.sh provides every optional part (MPI, LBFGS, torch for the PyTorch round trip, the
# Fashion-MNIST files), so here the MPI component is required and a skipped test counts as a failure:
# a missing dependency must not turn into a green run with fewer tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHAINLET_MPI=ON
cmake --build build
log=build/ctest-output.txt
ctest --test-dir build --output-on-failure -j2 2>&1 | tee "$log"
if grep -q '\*\*\*Skipped\|Not Run' "$log"; then
  echo "error: tests were skipped (see above); scripts/install-deps.sh should have installed what they need" >&2
  exit 1
fi
# The portable build (CHAINLET_SIMD=scalar: no xsimd, every kernel its plain C++ form): the programs of
# the kernels, Dense, Conv and the input derivatives (core_tests, tests/CMakeLists.txt).
# CHAINLET_KERNEL_INSTANCES=OFF: the six programs compile only the panels they use, not libchainlet's
# instances for the whole suite (docs/design.md, "Build").
cmake -S . -B build-scalar -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHAINLET_SIMD=scalar -DCHAINLET_MPI=OFF \
  -DCHAINLET_KERNEL_INSTANCES=OFF -DCHAINLET_BUILD_EXAMPLES=OFF -DCHAINLET_BUILD_BENCHMARKS=OFF -DCHAINLET_INSTALL=OFF > /dev/null
cmake --build build-scalar --target core_tests
scripts/run-core-tests.sh build-scalar
