#!/usr/bin/env bash
# Runs the programs of core_tests (tests/CMakeLists.txt: the kernels, Dense, Conv and the input
# derivatives) of the build in $1, through the command in $2 (e.g. qemu-aarch64 for a cross build), each
# with every one of its test cases; any failure fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
runner=${2:-}
[[ -s $build/tests/core_tests.txt ]] || { echo "error: $build/tests/core_tests.txt: not configured" >&2; exit 1; }
while read -r t; do
  echo "== $build: $t"
  $runner "$build/tests/$t" --warn NoTests < /dev/null
done < "$build/tests/core_tests.txt"
