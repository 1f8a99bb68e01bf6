#!/usr/bin/env bash
# The whole ctest suite with the AVX2 kernels (CHAINLET_SIMD=avx2), which is what most users' CPUs run:
# on an AVX-512 machine too, which runs AVX2 code. Tuned as for an AMD Zen 1 (-mtune=znver1): GCC's
# tuning decides where it fuses multiplies and adds that the code leaves to it, and with the Zen
# tunings it fused differently from its generic one, which broke bit-for-bit promises only on those
# CPUs. The compile_fail snippets are left out: they are compiled without any SIMD flag, the same in
# every build, and scripts/test.sh runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh > /dev/null
cmake -S . -B build-avx2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHAINLET_SIMD=avx2 -DCMAKE_CXX_FLAGS=-mtune=znver1 \
  -DCHAINLET_MPI=ON -DCHAINLET_BUILD_BENCHMARKS=OFF > /dev/null
cmake --build build-avx2
log=build-avx2/ctest-output.txt
ctest --test-dir build-avx2 --output-on-failure -j2 -LE '^compile_errors$' 2>&1 | tee "$log"
if grep -q '\*\*\*Skipped\|Not Run' "$log"; then
  echo "error: tests were skipped (see above)" >&2
  exit 1
fi
