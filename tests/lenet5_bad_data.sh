#!/usr/bin/env bash
# Feeds examples/lenet5 damaged copies of an MNIST-format data set and checks that each run exits with
# status 1 (not a signal, > 128) and prints exactly one line on stderr naming the damaged file.
#   tests/lenet5_bad_data.sh <lenet5 binary> <data dir with the four *-ubyte.gz files>
# Exit status 77 (ctest: skipped) if the data set is missing.
set -uo pipefail
exe=$1 data=$2
names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
for n in "${names[@]}"; do
  [[ -f $data/$n.gz ]] || { echo "SKIP: $data/$n.gz missing"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# A fresh directory linking to the good files; the case then replaces one of them.
setup() {
  dir=$work/$1
  mkdir -p "$dir"
  for n in "${names[@]}"; do ln -sf "$data/$n.gz" "$dir/$n.gz"; done
}
# Writes byte value $3 (decimal) at offset $2 of file $1.
poke() { printf "$(printf '\\%03o' "$3")" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }

expect_error() {  # <case> <damaged file> <text the message must contain>
  local case=$1 file=$2 text=$3
  "$exe" --data "$dir" --epochs 1 --limit 100 --threads 1 >"$work/$case.out" 2>"$work/$case.err"
  local status=$? lines
  lines=$(wc -l <"$work/$case.err")
  if [[ $status -ne 1 ]] || [[ $lines -ne 1 ]] || ! grep -qF "$file" "$work/$case.err" ||
     ! grep -qF "$text" "$work/$case.err"; then
    echo "FAIL $case: status $status (expected 1), $lines stderr lines (expected 1), wanted '$file' and '$text':"
    cat "$work/$case.err"
    failures=$((failures + 1))
  else
    echo "ok   $case: $(cat "$work/$case.err")"
  fi
}

setup truncated_gzip
f=$dir/t10k-images-idx3-ubyte.gz
rm "$f" && head -c 100000 "$data/t10k-images-idx3-ubyte.gz" >"$f"
expect_error truncated_gzip "$f" "truncated"

# The gzip magic, then noise of a fixed seed. Not /dev/urandom: noise that happens to read as a header
# with an extra field longer than the file is a truncated file, and that is what zlib then says.
setup garbage_gzip
f=$dir/t10k-labels-idx1-ubyte.gz
rm "$f" && { printf '\037\213'; perl -e 'srand(7); print map { chr(int(rand(256))) } 1 .. 3000'; } >"$f"
expect_error garbage_gzip "$f" "corrupt gzip data"

setup flipped_gzip  # damage inside the compressed stream of a good file
f=$dir/t10k-labels-idx1-ubyte.gz
rm "$f" && cp "$data/t10k-labels-idx1-ubyte.gz" "$f"
for off in 40 41 42 43 44 45 46 47 48 49 50; do poke "$f" "$off" 255; done
expect_error flipped_gzip "$f" "corrupt gzip data"

setup bad_magic  # raw (uncompressed) file with a damaged header
rm "$dir/t10k-labels-idx1-ubyte.gz"
f=$dir/t10k-labels-idx1-ubyte
gzip -dc "$data/t10k-labels-idx1-ubyte.gz" >"$f"
poke "$f" 1 7
expect_error bad_magic "$f" "bad magic number"

setup bad_type
rm "$dir/t10k-labels-idx1-ubyte.gz"
f=$dir/t10k-labels-idx1-ubyte
gzip -dc "$data/t10k-labels-idx1-ubyte.gz" >"$f"
poke "$f" 2 13
expect_error bad_type "$f" "element type 13"

setup huge_dims  # the header claims 2^32 - 1 labels
rm "$dir/t10k-labels-idx1-ubyte.gz"
f=$dir/t10k-labels-idx1-ubyte
gzip -dc "$data/t10k-labels-idx1-ubyte.gz" >"$f"
for off in 4 5 6 7; do poke "$f" "$off" 255; done
expect_error huge_dims "$f" "truncated: the data needs 4294967295 bytes"

setup truncated_raw
rm "$dir/train-labels-idx1-ubyte.gz"
f=$dir/train-labels-idx1-ubyte
gzip -dc "$data/train-labels-idx1-ubyte.gz" | head -c 5000 >"$f"
expect_error truncated_raw "$f" "truncated"

setup empty
f=$dir/train-images-idx3-ubyte.gz
rm "$f" && : >"$f"
expect_error empty "$f" "truncated: the header"

setup missing
f=$dir/t10k-images-idx3-ubyte.gz
rm "$f"
expect_error missing "$f" "no such file"

exit $((failures > 0))
