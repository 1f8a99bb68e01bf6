#!/usr/bin/env bash
# One command for the side-by-side benchmarks: installs what is needed (LibTorch, PyTorch, OpenBLAS,
# matplotlib), builds the comparison program, runs chainlet against LibTorch in one process and the
# PyTorch scripts after it, and writes docs/benchmarks.md, docs/benchmarks.json and docs/benchmarks.png.
#   bench/compare.sh            full run (LeNet5 epochs of 60,000 images; ~10 minutes on 2 cores)
#   bench/compare.sh --quick    short run (8,192-image epochs, fewer rounds; under 3 minutes once built)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=""
if [[ "${1:-}" == "--quick" ]]; then quick="--quick"; elif [[ -n "${1:-}" ]]; then
  echo "usage: bench/compare.sh [--quick]" >&2; exit 2
fi
scripts/install-deps.sh --compare
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHAINLET_BUILD_BENCHMARKS=ON > /dev/null
cmake --build build --target chainlet_compare
out=build/bench/results
mkdir -p "$out"
build/bench/chainlet_compare $quick --json "$out/chainlet_libtorch.json"
# Debian's python3-torch lives in the system interpreter, whatever python3 comes first on PATH.
/usr/bin/python3 bench/pytorch/compare.py $quick --json "$out/pytorch.json"
/usr/bin/python3 bench/report.py "$out/chainlet_libtorch.json" "$out/pytorch.json" docs
echo "wrote docs/benchmarks.md, docs/benchmarks.json, docs/benchmarks.png"
