#!/usr/bin/env bash
# Installs everything chainlet builds, tests, trains and benchmarks with, from Debian/Ubuntu packages.
#   scripts/install-deps.sh            build + tests + examples (+ the Fashion-MNIST data set)
#   scripts/install-deps.sh --compare  also LibTorch, PyTorch and OpenBLAS for the side-by-side benchmarks, and
#                                      build/compare-venv: the pinned wheels of today's frameworks (below)
#   scripts/install-deps.sh --sanitize / --fuzz  also clang, its sanitizer and libFuzzer runtimes, libomp
#   scripts/install-deps.sh --aarch64  also the 64-bit Arm cross compiler, qemu-user and the arm64 zlib
set -euo pipefail

packages=(cmake ninja-build g++ make libeigen3-dev libxsimd-dev catch2 libbenchmark-dev zlib1g-dev
          libopenmpi-dev openmpi-bin
          dataset-fashion-mnist)
packages+=(pkg-config)  # the installed-package test builds a program from `pkg-config --cflags --libs chainlet`
packages+=(nlohmann-json3-dev)  # the safetensors header's JSON (src/safetensors.cpp; not needed by consumers)
packages+=(libcli11-dev)  # the examples' command-line flags (examples/common/args.hpp)
packages+=(liblbfgspp-dev)  # chainlet/optim/lbfgs.hpp's line search (header-only, on Eigen): tests, neural_ode, pinn
# The PyTorch round-trip test (tests/pytorch_roundtrip.py) runs in CI, so torch and numpy are base packages.
packages+=(python3-torch python3-numpy)
if [[ "${1:-}" == "--compare" ]]; then
  packages+=(libtorch-dev libopenblas0-openmp python3-matplotlib)
fi
# --sanitize: clang's ThreadSanitizer runtime and LLVM's OpenMP with its Archer tool (scripts/sanitize.sh);
# --fuzz: clang with libFuzzer (scripts/fuzz.sh). Both come from libclang-rt-14-dev.
for arg in "$@"; do
  case $arg in
    --sanitize) packages+=(clang libclang-rt-14-dev libomp-dev) ;;
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    # scripts/test-aarch64.sh: the arm64 zlib comes from the multiarch archive (Debian; on Ubuntu, arm64
    # packages live on ports.ubuntu.com, which its sources must name first)
    --aarch64) packages+=(g++-aarch64-linux-gnu qemu-user zlib1g-dev:arm64) ;;
  esac
done

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  if [[ " ${missing[*]} " == *":arm64 "* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64
  fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "all dependencies are installed"
fi

# --compare: today's frameworks in a virtual environment under build/ (bench/compare.sh uses it), from
# PyPI with every version pinned. torch is pinned to the CPU build: unpinned, pip would fetch the
# multi-GB CUDA build. Reused when it already holds these versions.
if [[ "${1:-}" == "--compare" ]]; then
  cd "$(dirname "$0")/.."
  venv=build/compare-venv
  wheels=(torch==2.13.0 jax==0.10.2 jaxlib==0.10.2 optax==0.2.8 onnxruntime==1.30.0 onnx==1.23.2 numpy==2.4.6
          matplotlib==3.11.2)
  python=${PYTHON:-python3}  # a CPython 3.11 with pip and venv (the wheels above exist for it)
  if [[ -x $venv/bin/python ]] && $venv/bin/python -m pip freeze 2>/dev/null | grep -q '^torch==2.13.0' &&
     $venv/bin/python -c 'import jax, optax, onnxruntime, onnx, matplotlib' 2>/dev/null; then
    echo "build/compare-venv is ready"
  else
    echo "creating build/compare-venv: ${wheels[*]}"
    mkdir -p build
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q "${wheels[@]}"
  fi
fi
