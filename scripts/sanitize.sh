#!/usr/bin/env bash
# Sanitizer builds (docs/robustness.md):
#  1. build-asan: the whole test suite and the lenet5 example (no benchmarks) with clang++
#     -fsanitize=address,undefined -fno-sanitize=float-cast-overflow -fno-sanitize-recover=all -O0 -g1
#     and the AVX2 kernels (CHAINLET_SIMD=avx2), then every ctest test but the compile-only ones, then the
#     compile_fail snippets with that clang++;
#  2. build-tsan: the threaded tests with clang++ -fsanitize=thread and LLVM's OpenMP runtime (libomp),
#     whose Archer tool tells ThreadSanitizer about OpenMP's synchronisation. (GCC's libgomp is not
#     instrumented: ThreadSanitizer reports false races on any OpenMP loop.)
# Any sanitizer report fails the run. JOBS (default 2) sets the build and test parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --sanitize
jobs=${JOBS:-2}
start=$(date +%s)

# -g1 (line tables, no variable info): a report's stack still names every function, file and line,
# inlined frames included (checked: a heap overflow two always_inline calls deep shows all three frames,
# as with -g), and the build, which is most of this stage's time, is ~28 % shorter than with -g
# (test_dropout.cpp with g++ 12: 36.4 -> 26.3 s).
# -O0: the build is most of this stage's time, and g++ 12 compiled these templates with
# -fsanitize=address,undefined 2.7 times faster at -O0 than at -O1 (test_chain.cpp: 26 s against 70 s;
# -O1 with -g1 made this stage ~42 minutes of a 65-minute CI run on the Zen 3 machine kind).
# clang++ rather than g++ 12, for the time: side by side at -O0, clang 14 compiles a test
# program 2.3 times faster (the former tests_training unit: 39 s against 90 s of user time) and its tests run
# 1.7-1.9 times slower (four test cases); the build is about 70 % of the stage with g++ (921 of 1323 s
# in CI's run of 7ea930c). At -O1 clang's tests run ~20 times faster than g++'s at -O0, but test_conv's
# program compiles 5 times slower than at -O0 (604 s against 115 s); docs/profile.md, "Build cost".
# clang's -fsanitize=undefined includes float-cast-overflow, which g++'s leaves out; it fires in
# Debian's xsimd, whose generic double -> int64 conversion casts a NaN (xsimd::exp of a NaN, through
# tanh, whose result is NaN all the same), so it stays out (CHAINLET_NO_SANITIZE), as it was with g++.
# With clang, OpenMP is LLVM's libomp: the allocation tests hold there since parallel_for no longer uses
# OpenMP's dynamic-schedule dispatch, which allocated in libomp (include/chainlet/parallel.hpp).
# libchainlet's kernel instances alone compile at -O1 (CHAINLET_KERNEL_INSTANCES_OPTIONS): at -O0 every
# xsimd operation in them stays a call, through which every test's products run; at -O1 the suite runs
# in about half the time, for a minute more of their compile, and their loads and stores stay
# instrumented. The tests run slower at -O0, so the examples' smoke tests do less work in a sanitizer build
# (cmake/example_test_sizes.cmake). -O0 also keeps every load and store that the code writes, which
# ASan then checks (at -O1 some are folded away). clang's TSan stage below stays at -O1: it builds
# three tests only, and its OpenMP loops are what it checks.
common=(-G Ninja -DCMAKE_BUILD_TYPE=Debug -DCHAINLET_BUILD_BENCHMARKS=OFF)
asan_flags=("-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1" -DCHAINLET_NO_SANITIZE=float-cast-overflow -DCHAINLET_KERNEL_INSTANCES_OPTIONS=-O1)
tsan_flags=("-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1")

echo "== AddressSanitizer + UndefinedBehaviorSanitizer (clang++): all tests =="
# The AVX2 kernels: this is CI's run of the whole suite with them (what a CPU without AVX-512 runs, and
# an AVX-512 machine runs too), in the build that recompiles everything anyway; the release stage
# (scripts/test.sh) runs the whole suite with the native kernels, scripts/test-avx2.sh the core tests
# with g++'s AVX2 code.
# Of the examples, lenet5 alone (with lenet5_mpi): its tests read damaged data files and checkpoints, the
# examples' own code beyond the library's tests; the others are thin mains over the library that the
# release stage runs, and would cost this stage their compile and smoke runs.
CXX=clang++ cmake -S . -B build-asan "${common[@]}" "${asan_flags[@]}" -DCHAINLET_SANITIZE=address,undefined \
  -DCHAINLET_SIMD=avx2 -DCHAINLET_EXAMPLES=lenet5 > /dev/null
cmake --build build-asan -j"$jobs"
# detect_stack_use_after_return is off: with it, ASan moves frames to its "fake stack", whose frames
# are not aligned as the frame layout assumes, so a 64-byte-aligned local lands 32 bytes off a 64-byte
# boundary and its aligned AVX-512 store faults (test_containers' Slice check at 759c968: SIGSEGV at
# vmovdqa64 ..., -0x140(%rbx), fake frame base + 0xb20). A limitation of ASan's runtime, fixed in LLVM's
# compiler-rt in 2025 (llvm/llvm-project#152819, relanded as #153142); the libasan of Debian's GCC 12
# and clang 14 predate it. Every other ASan check stays on.
# Not the tests labelled install and compile_errors: they configure and compile other programs (the
# installed package's consumers, snippets that must not compile) and run none of this build's code
# beyond a hello-world; the release stage (scripts/test.sh) runs them, and here they took 2.5 minutes.
ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=0 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE '^(install|compile_errors)$'
# The snippets that must not compile, once more with this build's clang++: one readable error each there
# too. clang marks a class whose static_assert failed as invalid, so an assertion written in a class
# body gave 5-9 errors with clang and 1 with g++ (the assertions now sit in functions; docs/design.md).
# They only parse (-fsyntax-only). The contract's 19 cases, not the 46 shape mistakes of
# compile_fail/shape_mistakes.cpp (label compile_fail_shapes), which all go through one mechanism
# (layer.hpp's rejects_shape) and cost 3-4 s of CPU each; the release stage compiles them all with g++.
echo "== compile_fail snippets with clang++ =="
ctest --test-dir build-asan --output-on-failure -j"$jobs" -L '^compile_fail$' --no-tests=error
asan_done=$(date +%s)

echo "== ThreadSanitizer (clang++, libomp + Archer): threaded tests =="
# The threaded test programs (tests/CMakeLists.txt).
tsan_tests=(test_fit test_repro test_finite)
# CHAINLET_KERNEL_INSTANCES=OFF: three programs compile only the panels they use, not libchainlet's
# instances for the whole suite.
CXX=clang++ cmake -S . -B build-tsan "${common[@]}" "${tsan_flags[@]}" -DCHAINLET_SANITIZE=thread -DCHAINLET_BUILD_EXAMPLES=OFF \
  -DCHAINLET_KERNEL_INSTANCES=OFF > /dev/null
cmake --build build-tsan -j"$jobs" --target "${tsan_tests[@]}"
# Archer sits next to the libomp the tests are linked with.
libomp=$(ldd "build-tsan/tests/${tsan_tests[0]}" | awk '/libomp/ {print $3; exit}')
archer=$(dirname "$(readlink -f "$libomp")")/libarcher.so
[[ -f $archer ]] || { echo "error: $archer: no such file (install libomp-dev)" >&2; exit 1; }
for t in "${tsan_tests[@]}"; do
  echo "-- $t"
  # halt_on_error: the first race fails the test; Archer is named explicitly so a missing tool is
  # an error rather than a run full of false reports.
  OMP_TOOL_LIBRARIES=$archer ARCHER_OPTIONS=verbose=1 \
  TSAN_OPTIONS=ignore_noninstrumented_modules=1:halt_on_error=1:exitcode=66 \
    "build-tsan/tests/$t" --warn NoTests
done
end=$(date +%s)
echo "sanitize.sh: ASan+UBSan $((asan_done - start)) s, TSan $((end - asan_done)) s, total $((end - start)) s"
