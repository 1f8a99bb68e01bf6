#!/usr/bin/env bash
# 64-bit Arm: cross-builds the core test programs (the kernels, Dense, Conv and the input derivatives;
# tests/CMakeLists.txt's core_tests) with Debian's g++-aarch64-linux-gnu and xsimd's NEON kernels, and
# runs them under qemu-user. Apple silicon, Graviton and Grace run this code.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --aarch64 > /dev/null
cmake -S . -B build-aarch64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DCHAINLET_SIMD=neon -DCHAINLET_MPI=OFF \
  -DCHAINLET_KERNEL_INSTANCES=OFF \
  -DCHAINLET_BUILD_EXAMPLES=OFF -DCHAINLET_BUILD_BENCHMARKS=OFF -DCHAINLET_INSTALL=OFF > /dev/null
cmake --build build-aarch64 --target core_tests
scripts/run-core-tests.sh build-aarch64 "qemu-aarch64 -L /usr/aarch64-linux-gnu"
