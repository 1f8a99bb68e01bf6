#!/usr/bin/env bash
# The core test programs (tests/CMakeLists.txt's core_tests: the kernels, Dense, Conv and the input
# derivatives) with g++ and the AVX2 kernels (CHAINLET_SIMD=avx2), which is what most users' CPUs run: on an
# AVX-512 machine too, which runs AVX2 code. Tuned as for an AMD Zen 1 (-mtune=znver1): GCC's tuning
# decides where it fuses the multiplies and adds of scalar code (C++ contracts by default), and with the
# Zen tunings it fused differently from its generic one, which broke bit-for-bit promises only on those
# CPUs. The whole suite runs with the AVX2 kernels in the sanitizer stage (scripts/sanitize.sh), built
# with clang++.
set -euo pipefail
cd "$(dirname "$0")/.."
# On a CPU without AVX-512 the native build (scripts/test.sh) is already this one: g++'s AVX2 kernels,
# tuned for this CPU, through the whole suite. CHAINLET_AVX2_STAGE=always runs it anyway.
if ! grep -qw avx512f /proc/cpuinfo && [[ ${CHAINLET_AVX2_STAGE:-} != always ]]; then
  echo "test-avx2.sh: no AVX-512 here, so the native stage ran the AVX2 kernels through the whole suite; skipped"
  exit 0
fi
scripts/install-deps.sh > /dev/null
cmake -S . -B build-avx2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHAINLET_SIMD=avx2 -DCMAKE_CXX_FLAGS=-mtune=znver1 \
  -DCHAINLET_KERNEL_INSTANCES=OFF -DCHAINLET_MPI=OFF -DCHAINLET_BUILD_EXAMPLES=OFF -DCHAINLET_BUILD_BENCHMARKS=OFF -DCHAINLET_INSTALL=OFF > /dev/null
cmake --build build-avx2 --target core_tests
scripts/run-core-tests.sh build-avx2
