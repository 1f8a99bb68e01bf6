#!/usr/bin/env bash
# ctest driver for examples/neural_ode: runs the example with the given flags and checks that it ends
# with `initial_loss=<a> final_loss=<b>`, that the loss dropped at least MIN_FACTOR times, and that the
# CSV has every row.   usage: check.sh EXE MIN_FACTOR CSV [flags...]
set -euo pipefail
exe=$1 factor=$2 csv=$3
shift 3
out=$("$exe" --csv "$csv" "$@")
echo "$out"
last=$(grep -E '^initial_loss=' <<<"$out" | tail -1)
[[ -n "$last" ]] || { echo "FAIL: no initial_loss=... final_loss=... line"; exit 1; }
awk -v f="$factor" '{
  for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
  if (!(v["final_loss"] > 0) || !(v["initial_loss"] >= f * v["final_loss"])) {
    printf "FAIL: loss dropped %g times (%s -> %s), expected at least %g\n", v["initial_loss"] / v["final_loss"], v["initial_loss"], v["final_loss"], f
    exit 1
  }
  printf "OK: loss dropped %g times\n", v["initial_loss"] / v["final_loss"]
}' <<<"$last"
rows=$(($(wc -l <"$csv") - 1))
[[ $rows -eq 244 ]] || { echo "FAIL: $csv has $rows data rows, expected 4 trajectories x 61 times = 244"; exit 1; }
