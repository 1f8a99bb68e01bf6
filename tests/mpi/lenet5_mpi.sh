#!/usr/bin/env bash
# `mpirun -np 2 lenet5 --mpi` (lenet5 links no MPI and execs lenet5_mpi) trains on both ranks, and
# rank 0 reports the same checksum for both.
#   tests/mpi/lenet5_mpi.sh "<mpirun, its flags and -np 2, separated by |>" <lenet5 binary> [arguments...]
set -euo pipefail
IFS='|' read -r -a mpirun <<<"$1"
exe=$2
shift 2
out=$("${mpirun[@]}" "$exe" --mpi --threads 1 "$@") || { echo "FAIL: exit status $?" >&2; echo "$out"; exit 1; }
echo "$out" | grep -E 'mpi:|checksum='
r0=$(grep -o '^rank=0 checksum=[0-9a-f]*' <<<"$out" | cut -d= -f3)
r1=$(grep -o '^rank=1 checksum=[0-9a-f]*' <<<"$out" | cut -d= -f3)
[[ -n $r0 && $r0 == "$r1" ]] || { echo "FAIL: rank checksums '$r0' and '$r1'" >&2; exit 1; }
grep -q 'data-parallel over 2 ranks' <<<"$out" || { echo "FAIL: not data-parallel over 2 ranks" >&2; exit 1; }
