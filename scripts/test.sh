#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine, builds chainlet with its tests, and runs them all.
# install-deps.sh provides every optional part (MPI, liblbfgs, torch for the PyTorch round trip, the
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
# The portable build (CHAINLET_SIMD=scalar: no xsimd, every kernel its plain C++ form), a few test
# programs that cover the kernels, a dense and a convolutional layer and the input-derivative pass.
# Until 2026-11-24 no build exercised it, and simd::hsum_add added nothing there.
cmake -S . -B build-scalar -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHAINLET_SIMD=scalar -DCHAINLET_MPI=OFF \
  -DCHAINLET_BUILD_EXAMPLES=OFF -DCHAINLET_BUILD_BENCHMARKS=OFF
# tests_dense holds test_kernels, test_dense and test_input_derivatives, tests_conv holds test_conv
# (tests/CMakeLists.txt).
cmake --build build-scalar --target tests_dense tests_conv
echo "== scalar build: test_kernels, test_dense, test_input_derivatives"
build-scalar/tests/tests_dense --warn NoTests
echo "== scalar build: test_conv"
build-scalar/tests/tests_conv "[#test_conv]" --warn NoTests
