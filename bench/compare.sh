#!/usr/bin/env bash
# One command for the side-by-side benchmarks against today's frameworks: installs what is needed
# (scripts/install-deps.sh --compare: Debian's LibTorch 1.13, PyTorch 1.13 and OpenBLAS, and the pinned
# wheels of PyTorch 2.13, JAX 0.10, optax and ONNX Runtime 1.30 in build/compare-venv), builds the two
# comparison programs (chainlet against LibTorch 1.13 and against the wheel's LibTorch 2.13) and chainlet's
# AVX2 build of the first, runs every framework on the same workloads with 1 and with 2 threads (and the
# native and AVX2 builds of chainlet in turn), each process pinned with taskset, and
# writes docs/benchmarks.md (with chainlet's per-layer profile, bench/profile.cpp), docs/benchmarks.json,
# docs/benchmarks-details.json, docs/benchmarks.png, docs/latency_grid.png and the README's speed table.
#   bench/compare.sh            full run (LeNet5 epochs of 60,000 images, full latency grid)
#   bench/compare.sh --quick    short run (4,096-image epochs, 5-point grid, fewer rounds, without the
#                               historical LibTorch / PyTorch 1.13 columns; under 3 minutes once built)
# Builds run under `nice -n 19`; the timed runs do not. CI (.ci/run) does not run this.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=""
if [[ "${1:-}" == "--quick" ]]; then quick="--quick"; elif [[ -n "${1:-}" ]]; then
  echo "usage: bench/compare.sh [--quick]" >&2; exit 2
fi
start=$(date +%s)
scripts/install-deps.sh --compare
venv=build/compare-venv
py=$venv/bin/python
notes=()

nice -n 19 cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHAINLET_BUILD_BENCHMARKS=ON > /dev/null
nice -n 19 cmake --build build --target chainlet_compare chainlet_profile
# LibTorch 2.13 from the wheel: its own build tree (Torch's CMake package defines fixed target names),
# searched before Debian's LibTorch (CMAKE_PREFIX_PATH; Caffe2_DIR, which TorchConfig looks up itself).
torch_prefix=$($py -c 'import os, torch; print(os.path.dirname(torch.__file__))')
torch2=build/compare-torch2/bench/chainlet_compare_torch2
if ! { nice -n 19 cmake -S . -B build/compare-torch2 -G Ninja -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_PREFIX_PATH="$torch_prefix" -DTorch_DIR="$torch_prefix/share/cmake/Torch" \
         -DCaffe2_DIR="$torch_prefix/share/cmake/Caffe2" -DCHAINLET_BUILD_TESTS=OFF \
         -DCHAINLET_BUILD_EXAMPLES=OFF -DCHAINLET_MPI=OFF > build/compare-torch2.log 2>&1 &&
       nice -n 19 cmake --build build/compare-torch2 --target chainlet_compare >> build/compare-torch2.log 2>&1; }; then
  echo "LibTorch 2.13 program did not build (build/compare-torch2.log); its column stays empty" >&2
  notes+=("chainlet_compare_torch2 did not build: $(grep -m1 -E 'error|Error' build/compare-torch2.log || true)")
  torch2=""
fi

# chainlet's AVX2 build (CHAINLET_SIMD=avx2: 256-bit vectors and FMA3, what a CPU without AVX-512 runs),
# against Debian's LibTorch, whose side it does not run (--chainlet-only).
avx2=build/compare-avx2/bench/chainlet_compare
if ! { nice -n 19 cmake -S . -B build/compare-avx2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHAINLET_SIMD=avx2 \
         -DCHAINLET_BUILD_TESTS=OFF -DCHAINLET_BUILD_EXAMPLES=OFF -DCHAINLET_MPI=OFF > build/compare-avx2.log 2>&1 &&
       nice -n 19 cmake --build build/compare-avx2 --target chainlet_compare >> build/compare-avx2.log 2>&1; }; then
  echo "the AVX2 build did not build (build/compare-avx2.log); its column stays empty" >&2
  notes+=("the AVX2 build of chainlet_compare did not build: $(grep -m1 -E 'error|Error' build/compare-avx2.log || true)")
  avx2=""
fi

out=build/bench/results
rm -rf "$out"
mkdir -p "$out"
# torch.compile's on-disk cache: the full run starts from an empty one, so its first-step figures are a
# cold start (the 2-thread process then finds what the 1-thread process compiled); --quick keeps it.
export TORCHINDUCTOR_CACHE_DIR=$PWD/build/bench/inductor-cache
# The same for JAX's persistent compilation cache (bench/jax/compare.py turns it on when this is set).
export CHAINLET_JAX_CACHE_DIR=$PWD/build/bench/jax-cache
# Transparent huge pages for every process's large buffers: glibc (2.35 and later) then advises its
# mmap'd allocations for huge pages, whatever allocates through malloc (PyTorch's and XLA's CPU
# allocators, ONNX Runtime's arena, numpy, std::vector). Where the kernel's THP setting is "madvise", the
# data sets are otherwise read through 4 KiB pages; on a 2-vCPU Xeon VM (docs/profile.md) that cost
# chainlet's LeNet5 epoch 25 % and LibTorch 1.13's 40 % (inference 30 % and 57 %).
# With "always" it changes nothing; with "never" it cannot help. The same for every framework.
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo "not available")
notes+=("every process ran with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (malloc's large buffers advised for transparent huge pages; the kernel's setting: $thp)")
if [[ -z $quick ]]; then
  rm -rf "$TORCHINDUCTOR_CACHE_DIR" "$CHAINLET_JAX_CACHE_DIR"; cache="empty at the start (cold for 1 thread)"
else
  cache="kept from earlier runs (warm)"
fi

loads=()
durations=()
run() {  # run NAME THREADS COMMAND...: pinned to the first THREADS CPUs, with the load and duration noted
  local name=$1 t=$2 t0; shift 2
  loads+=("\"$name-$t\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"")
  echo "== $name, $t thread(s)"
  t0=$(date +%s)
  OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t taskset -c "$(seq -s, 0 $((t - 1)))" "$@"
  durations+=("\"$name-$t\": $(( $(date +%s) - t0 ))")
}
thread_counts=(1)
if (( $(nproc) >= 2 )); then thread_counts+=(2); fi
for t in "${thread_counts[@]}"; do
  if [[ -n $torch2 ]]; then run libtorch2 "$t" "$torch2" $quick --thread-count "$t" --json "$out/libtorch2-$t.json"; fi
  run pytorch2 "$t" "$py" bench/pytorch/compare.py $quick --thread-count "$t" --json "$out/pytorch2-$t.json"
  run jax "$t" "$py" bench/jax/compare.py $quick --thread-count "$t" --json "$out/jax-$t.json"
  run onnxruntime "$t" "$py" bench/onnx/compare.py $quick --thread-count "$t" --json "$out/onnxruntime-$t.json" \
    --models build/bench/onnx-models
  # The AVX2 column: chainlet's rows of the native and the AVX2 build, the two programs in turn (twice
  # each in the full run), so that both see the same machine; report.py takes each one's fastest run.
  if [[ -n $avx2 ]]; then
    for r in $(seq 1 $([[ -n $quick ]] && echo 1 || echo 2)); do
      run "native-$r" "$t" build/bench/chainlet_compare $quick --chainlet-only --thread-count "$t" --json "$out/native-$r-$t.json"
      run "avx2-$r" "$t" "$avx2" $quick --chainlet-only --thread-count "$t" --json "$out/avx2-$r-$t.json"
    done
  fi
  # The historical columns (full run only): Debian's LibTorch and PyTorch 1.13. Debian's python3-torch
  # lives in the system interpreter, whatever python3 comes first on PATH.
  if [[ -z $quick ]]; then
    run libtorch113 "$t" build/bench/chainlet_compare --thread-count "$t" --json "$out/libtorch113-$t.json"
    run pytorch113 "$t" /usr/bin/python3 bench/pytorch/compare.py --no-grid --thread-count "$t" --json "$out/pytorch113-$t.json"
  fi
done
# chainlet's per-layer profile of the same workloads (issue 16), pinned as the rows with the most threads:
# where each step's time goes, layer by layer, with % of the FMA peak; report.py puts it in the report.
tmax=${thread_counts[-1]}
run profile "$tmax" bash -c "build/bench/chainlet_profile $quick --threads $tmax > $out/profile.md"
wall=$(( $(date +%s) - start ))
{
  echo "{\"quick\": $([[ -n $quick ]] && echo true || echo false), \"wall_seconds\": $wall,"
  echo " \"inductor_cache\": \"$cache\","
  echo " \"load\": {$(IFS=,; echo "${loads[*]}")},"
  echo " \"process_seconds\": {$(IFS=,; echo "${durations[*]}")},"
  printf ' "notes": ['; first=1
  for n in "${notes[@]}"; do ((first)) || printf ', '; first=0; printf '%s' "$($py -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$n")"; done
  echo ']}'
} > "$out/run.json"
"$py" bench/report.py "$out" docs
echo "wrote docs/benchmarks.md, docs/benchmarks.json, docs/benchmarks-details.json, docs/benchmarks.png, docs/latency_grid.png in $wall s"
