#!/usr/bin/env bash
# The PINN step side by side in one run (issue 14): chainlet (bench/pinn_bench), PyTorch 1.13 (Debian's
# /usr/bin/python3), PyTorch 2.13 and JAX 0.10 (a venv with the pinned wheels: build/compare-venv, made
# by bench/compare.sh, or the interpreter given as $1). 1 thread = pinned to CPU 0 (taskset), 2 = CPUs 0,1.
#   bench/pinn/run.sh [venv python]          (from the repository root, after building pinn_bench)
# Prints each system's JSON line, then its time over chainlet's (wall and process CPU time: on a shared,
# loaded machine the CPU-time ratio with 1 thread is the steadier one).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py2=${1:-build/compare-venv/bin/python}
out=$(mktemp)
taskset -c 0,1 build/bench/pinn_bench --steps 100 --repeats 5 | tee /dev/stderr | tail -1 > "$out.chainlet"
for dtype in float32 float64; do
  for threads in 1 2; do
    cpus=$([[ $threads == 1 ]] && echo 0 || echo 0,1)
    taskset -c $cpus /usr/bin/python3 "$here/pinn_torch.py" --dtype $dtype --threads $threads >> "$out" || true
    if [[ -x $py2 ]]; then
      taskset -c $cpus "$py2" "$here/pinn_torch.py" --dtype $dtype --threads $threads >> "$out" || true
      taskset -c $cpus "$py2" "$here/pinn_jax.py" --dtype $dtype >> "$out" 2>/dev/null || true
    fi
  done
done
cat "$out"
/usr/bin/python3 - "$out.chainlet" "$out" <<'PY'
import json, sys
chain = {(r["dtype"], r["threads"]): r for r in json.load(open(sys.argv[1]))}
print("system                       dtype   thr  wall ms  (chainlet)  ratio | CPU ms  (chainlet)  ratio")
for line in open(sys.argv[2]):
    r = json.loads(line)
    c = chain[(r["dtype"], r["threads"])]
    print(f'{r["system"]:28s} {r["dtype"]} {r["threads"]}  {r["ms_per_step"]:8.3f} ({c["ms_per_step"]:7.3f}) '
          f'{r["ms_per_step"] / c["ms_per_step"]:5.1f}x | {r.get("cpu_ms_per_step", float("nan")):7.3f} '
          f'({c["cpu_ms_per_step"]:7.3f}) {r.get("cpu_ms_per_step", float("nan")) / c["cpu_ms_per_step"]:5.1f}x')
PY
rm -f "$out" "$out.chainlet"
