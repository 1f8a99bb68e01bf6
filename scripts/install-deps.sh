#!/usr/bin/env bash
# Installs everything chainlet builds, tests, trains and benchmarks with, from Debian/Ubuntu packages.
#   scripts/install-deps.sh            build + tests + examples (+ the Fashion-MNIST data set)
#   scripts/install-deps.sh --compare  also LibTorch, PyTorch and OpenBLAS for the side-by-side benchmarks
set -euo pipefail

packages=(cmake ninja-build g++ make libeigen3-dev libxsimd-dev catch2 libbenchmark-dev zlib1g-dev
          dataset-fashion-mnist)
# The PyTorch round-trip test (tests/pytorch_roundtrip.py) runs in CI, so torch and numpy are base packages.
packages+=(python3-torch python3-numpy)
if [[ "${1:-}" == "--compare" ]]; then
  packages+=(libtorch-dev python3-torch libopenblas0-openmp python3-matplotlib)
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "all dependencies are installed"
fi
