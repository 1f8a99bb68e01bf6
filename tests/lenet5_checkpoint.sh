#!/usr/bin/env bash
# examples/lenet5 --save / --resume: a checkpoint written after each epoch resumes training; a damaged or
# missing checkpoint is a one-line error with exit status 1, and the file it names is left as it was.
#   tests/lenet5_checkpoint.sh <lenet5 binary> [extra arguments, e.g. --limit 600]
set -uo pipefail
exe=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$exe" "$@" --epochs 1 --threads 1 --save "$work/a.ckpt" >"$work/first.out" || fail "first run exited with $?"
grep -q "saved $work/a.ckpt" "$work/first.out" || fail "no 'saved' line"
[[ -s $work/a.ckpt ]] || fail "no checkpoint written"
cp "$work/a.ckpt" "$work/before.ckpt"

"$exe" "$@" --epochs 1 --threads 1 --resume "$work/a.ckpt" --save "$work/a.ckpt" >"$work/resumed.out" ||
  fail "resumed run exited with $?"
grep -q "resumed from $work/a.ckpt after [1-9][0-9]* Adam steps" "$work/resumed.out" || fail "no 'resumed from' line"
cmp -s "$work/a.ckpt" "$work/before.ckpt" && fail "the resumed run did not update the checkpoint"
first=$(grep -o 'checksum=[0-9a-f]*' "$work/first.out" | tail -1)
second=$(grep -o 'checksum=[0-9a-f]*' "$work/resumed.out" | tail -1)
[[ -n $first && $first != "$second" ]] || fail "resumed training did not change the parameters ($first, $second)"

# A flipped byte in the middle: the checksum catches it.
cp "$work/before.ckpt" "$work/bad.ckpt"
size=$(stat -c %s "$work/bad.ckpt")
printf '\x5a' | dd of="$work/bad.ckpt" bs=1 seek=$((size / 2)) conv=notrunc status=none
for f in "$work/bad.ckpt" "$work/missing.ckpt"; do
  "$exe" "$@" --epochs 1 --threads 1 --resume "$f" >"$work/err.out" 2>"$work/err.err"
  status=$?
  [[ $status -eq 1 ]] || fail "--resume $f: exit status $status, expected 1"
  [[ $(wc -l <"$work/err.err") -eq 1 ]] && grep -qF "$f" "$work/err.err" ||
    fail "--resume $f: expected one line naming the file, got: $(cat "$work/err.err")"
  echo "--resume $(basename "$f"): $(cat "$work/err.err")"
done
echo "ok: $first then $second"
