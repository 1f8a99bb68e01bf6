#!/usr/bin/env bash
# Builds and runs one libFuzzer target (see docs/robustness.md):
#   scripts/fuzz.sh <name> <seconds> [extra libFuzzer flags...]
# fuzz/<name>.cpp is compiled with Debian's clang (-fsanitize=fuzzer,address,undefined) together with
# src/*.cpp into build-fuzz/<name>, then run for <seconds> on a copy of the committed seeds
# fuzz/corpus/<name>/ (the generated corpus stays in build-fuzz/, uncommitted). Crashing inputs are
# written to build-fuzz/<name>-artifacts/; keep them in tests/data/fuzz/<name>/ as regression tests.
# Prints the execution count; exits non-zero if the fuzzer found a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 2)); then
  echo "usage: scripts/fuzz.sh <name> <seconds> [libFuzzer flags...]" >&2
  exit 2
fi
name=$1 seconds=$2
shift 2
[[ -f fuzz/$name.cpp ]] || { echo "error: fuzz/$name.cpp: no such fuzz target" >&2; exit 2; }
scripts/install-deps.sh --fuzz > /dev/null
cxx=${CXX_FUZZ:-clang++}
mkdir -p build-fuzz/"$name"-corpus build-fuzz/"$name"-artifacts
# The library sources are compiled once per target with the fuzzer's instrumentation; with
# CHAINLET_IMPLICIT_KERNELS the fuzzer instantiates the kernels it uses itself (kernel_instances.hpp).
"$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Wno-unknown-warning-option \
  -Iinclude -DCHAINLET_IMPLICIT_KERNELS \
  fuzz/"$name".cpp src/*.cpp -lz -o build-fuzz/"$name"
seeds=fuzz/corpus/$name
[[ -d $seeds ]] || seeds=
log=build-fuzz/$name.log
start=$(date +%s)
status=0
build-fuzz/"$name" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix=build-fuzz/"$name"-artifacts/ \
  "$@" build-fuzz/"$name"-corpus $seeds 2>&1 | tee "$log" | grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|ERROR|SUMMARY|stat::' \
  || true
status=${PIPESTATUS[0]}
end=$(date +%s)
execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -1)
echo "fuzz $name: ${execs:-?} executions in $((end - start)) s, exit status $status (log: $log)"
exit "$status"
