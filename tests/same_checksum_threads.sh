#!/usr/bin/env bash
# Runs an example with --threads 1 and --threads 2 (plus the given arguments) and checks that both
# print the same checksum=<hex> of their final parameters.
#   tests/same_checksum_threads.sh <example binary> [arguments...]
set -euo pipefail
exe=$1
shift
checksum() {
  local out
  out=$("$exe" "$@") || { echo "FAIL: $exe $* exited with status $?" >&2; exit 1; }
  grep -o 'checksum=[0-9a-f]*' <<<"$out" | tail -1
}
one=$(checksum "$@" --threads 1)
two=$(checksum "$@" --threads 2)
echo "threads 1: $one"
echo "threads 2: $two"
[[ -n $one ]] || { echo "FAIL: no checksum line" >&2; exit 1; }
[[ $one == "$two" ]] || { echo "FAIL: checksums differ" >&2; exit 1; }
