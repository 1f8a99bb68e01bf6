#!/usr/bin/env bash
# An example's command line (examples/common/args.hpp, CLI11): --help exits 0 and lists every flag
# given here; an unknown flag, a value out of range or not a number, a missing value and a repeated
# flag each exit with status 2 and exactly one line on stderr naming the problem.
#   tests/example_flags.sh <example binary> <numeric flag> [other flags...]
set -uo pipefail
exe=$1 numeric=$2
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

help=$("$exe" --help) || { echo "FAIL: --help exited with status $?"; exit 1; }
for flag in "$@"; do
  grep -q -- "$flag" <<<"$help" || { echo "FAIL: --help does not list $flag"; failures=$((failures + 1)); }
done

expect_error() {  # <text the one stderr line must contain> <arguments...>
  local text=$1
  shift
  "$exe" "$@" >"$work/out" 2>"$work/err"
  local status=$? lines
  lines=$(wc -l <"$work/err")
  if [[ $status -ne 2 ]] || [[ $lines -ne 1 ]] || ! grep -qF -- "$text" "$work/err"; then
    echo "FAIL $*: status $status (expected 2), $lines stderr lines (expected 1), wanted '$text':"
    cat "$work/err"
    failures=$((failures + 1))
  else
    echo "ok   $*: $(cat "$work/err")"
  fi
}
expect_error "--no-such-flag" --no-such-flag 1
expect_error "not expected: stray" stray
expect_error "$numeric" "$numeric" 99999999999999999999999
expect_error "$numeric" "$numeric" -1x
expect_error "$numeric" "$numeric"
expect_error "$numeric" "$numeric" 1 "$numeric" 1
((failures == 0)) || { echo "$failures failure(s)"; exit 1; }
