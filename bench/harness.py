"""What the Python sides of the comparison share (bench/pytorch, bench/jax, bench/onnx): the workloads'
names and sizes (those of bench/compare.cpp), the timer (blocks of calls sized to a target time, medians
of rounds, warm-up excluded), frameworks alternating round by round inside one process, the first-call
cost, and the JSON every script writes for bench/report.py.

Each script runs ONE thread count per process: bench/compare.sh pins the process with taskset (CPU 0
for 1 thread, CPUs 0-1 for 2) and the script sets the framework's own thread count.
"""
import argparse
import json
import statistics
import time

TINY = [4, 32, 16, 4]
WIDE = [2, 64, 64, 2]
TINY_N = 10000
WIDE_BATCHES = (1, 32, 256)
LENET_BATCH = 2048


def lenet_images(quick):
    return 4096 if quick else 60000


def lenet_test_images(quick):
    return 2048 if quick else 10000


def lenet_inference_name(quick):
    return f"LeNet5 inference, {'2048 images' if quick else '10k images'}"


def lenet_epoch_name(quick):
    return f"LeNet5 train epoch, {'4096 images' if quick else '60k images'}, batch 2048"


def grid_batches(quick):
    """Batch sizes of the inference latency grid: 1, 2, 4, ..., 2048 (quick: 1, 8, 64, 512, 2048)."""
    step = 8 if quick else 2
    b, out = 1, []
    while b <= 2048:
        out.append(b)
        b *= step
    if out[-1] != 2048:
        out.append(2048)
    return out


def settings(quick):
    """(rounds, seconds per block) for the rows, and the same for the grid."""
    return ((3, 0.05), (3, 0.01)) if quick else ((7, 0.2), (5, 0.05))


def parse_args(description):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--thread-count", type=int, required=True, help="threads of this process (pin it with taskset)")
    ap.add_argument("--json", required=True)
    return ap


def per_call(f, target, iters=None):
    """Seconds per call of f over a block of calls sized (on the first block) to take about `target`
    seconds; returns (seconds, iters)."""
    if iters is None:
        k = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(k):
                f()
            t = time.perf_counter() - t0
            if t > target / 4 or k > (1 << 24):
                iters = max(1, int(k * target / t))
                if iters <= k:  # this block was long enough already: a slow call is not run again
                    return t / k, iters
                break
            k *= 4
    t0 = time.perf_counter()
    for _ in range(iters):
        f()
    return (time.perf_counter() - t0) / iters, iters


def time_once(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def alternate(steps, rounds, target):
    """steps: {framework: callable}. Warms each up (which also sizes its blocks), then runs them in turn
    for `rounds` rounds; returns {framework: median seconds per call}."""
    iters = {k: per_call(f, target / 2)[1] for k, f in steps.items()}
    times = {k: [] for k in steps}
    for _ in range(rounds):
        for k, f in steps.items():
            times[k].append(per_call(f, target, iters[k])[0])
    return {k: statistics.median(v) for k, v in times.items()}


class Results:
    """Collects rows, grid points and first-call costs; writes them as one JSON object."""

    def __init__(self, threads, **meta):
        self.threads = threads
        self.meta = meta
        self.rows, self.grid, self.first = [], [], []

    def row(self, workload, seconds):
        for fw, s in seconds.items():
            self.rows.append({"workload": workload, "threads": self.threads, "framework": fw, "seconds": s})
            print(f"{workload:<46} {self.threads:3d}  {fw:<24} {s * 1e6:14.3f} us", flush=True)

    def grid_point(self, model, batch, seconds):
        for fw, s in seconds.items():
            self.grid.append({"model": model, "batch": batch, "threads": self.threads, "framework": fw, "seconds": s})
        print(f"grid: {model:<8} batch {batch:5d} {self.threads:3d}  "
              + "  ".join(f"{fw} {s * 1e6:.1f} us" for fw, s in seconds.items()), flush=True)

    def first_call(self, workload, framework, first, steady):
        """first: seconds of the first call on fresh state (compilation, tracing, session creation and
        one-time initialisation included); steady: a later call, for scale."""
        self.first.append({"workload": workload, "framework": framework, "threads": self.threads,
                           "first_seconds": first, "steady_seconds": steady})
        print(f"first call: {workload:<40} {framework:<24} {self.threads:3d}  {first * 1e3:10.2f} ms "
              f"(then {steady * 1e3:.3f} ms)", flush=True)

    def write(self, path):
        with open(path, "w") as f:
            json.dump({**self.meta, "threads": self.threads, "rows": self.rows, "grid": self.grid,
                       "first_step": self.first}, f, indent=1)


def first_and_steady(prepare, step, rounds=3):
    """Times prepare() + the first step() (what a program pays before its first result), then the median
    of `rounds` later steps (one if a step takes over 50 ms)."""
    t0 = time.perf_counter()
    prepare()
    step()
    first = time.perf_counter() - t0
    times = [time_once(step)]
    if times[0] < 0.05:
        times += [time_once(step) for _ in range(rounds - 1)]
    return first, statistics.median(times)
