#!/usr/bin/env bash
# Runs the programs of core_tests (tests/CMakeLists.txt: the kernels, Dense, Conv and the input
# derivatives) of the build in $1, through the command in $2 (e.g. qemu-aarch64 for a cross build), each
# with every one of its test cases, JOBS (default 2) at a time: under qemu each runs on one core. Each
# program's output is shown whole once it ends; any failure fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
runner=${2:-}
[[ -s $build/tests/core_tests.txt ]] || { echo "error: $build/tests/core_tests.txt: not configured" >&2; exit 1; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
run_one() {  # run_one PROGRAM: its output to $logs/PROGRAM, then shown; 1 when it failed
  local t=$1 status=0
  $runner "$build/tests/$t" --warn NoTests < /dev/null > "$logs/$t" 2>&1 || status=1
  { echo "== $build: $t"; cat "$logs/$t"; } | flock "$logs" cat
  # 1, never the program's own status: Catch2 exits with the number of failures up to 255, and xargs
  # stops at once, without waiting for the others, when a command exits with 255.
  return "$status"
}
export -f run_one
export build runner logs
xargs -P "${JOBS:-2}" -I{} bash -c 'run_one "$1"' _ {} < "$build/tests/core_tests.txt"
