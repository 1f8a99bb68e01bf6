"""What the Python sides of the comparison share (bench/pytorch, bench/jax, bench/onnx): the workloads'
names and sizes (those of bench/compare.cpp), the timer (blocks of calls sized to a target time, medians
of rounds, warm-up excluded), frameworks alternating round by round inside one process, the first-call
cost, and the JSON every script writes for bench/report.py.

Each script runs ONE thread count per process: bench/compare.sh pins the process with taskset (CPU 0
for 1 thread, CPUs 0-1 for 2) and the script sets the framework's own thread count.

`--only SUBSTRING` keeps the workloads whose name contains SUBSTRING (case-sensitive; empty: all). The
latency grid counts as a workload named "latency grid": `--only GRU` skips it, `--only grid` runs
nothing but it.
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

# GRU: nn.GRU(4, 32) over 50 steps, its last hidden state into Linear(32, 1); Adam(1e-3) on MSE.
GRU_FEATURES, GRU_HIDDEN, GRU_STEPS, GRU_BATCH = 4, 32, 50, 256
GRU_TRAIN = "GRU train step, batch 256"
GRU_INFER = "GRU inference, 1 sequence"

# Conv1D net on sequences of 64 steps x 4 channels: Conv1d(4, 16, 5, padding 2), ReLU, MaxPool(2),
# Conv1d(16, 32, 5, padding 2), ReLU, MaxPool(2), global average pool, Linear(32, 4); Adam(1e-3) on MSE.
CONV1D_CHANNELS, CONV1D_LENGTH, CONV1D_OUTPUTS, CONV1D_BATCH = 4, 64, 4, 256
CONV1D_TRAIN = "Conv1D net train step, batch 256"
CONV1D_INFER = "Conv1D net inference, 1 sequence"

# PINN for the 2-D Poisson problem -Lap u = f on the unit square, f = 2 pi^2 sin(pi x) sin(pi y), u = 0 on
# the boundary (examples/pinn; bench/compare.cpp has the chainlet and LibTorch sides): MLP 2-32-32-32-1 tanh, 1,024 interior points uniform in the square,
# 256 boundary points (point i on side i % 4 at a uniform position), loss mean (Lap u + f)^2 + mean u^2,
# Adam(1e-3); one row per dtype.
PINN_SIZES = [2, 32, 32, 32, 1]
PINN_INTERIOR, PINN_BOUNDARY = 1024, 256
PINN_DTYPES = ("float32", "float64")
GRID = "latency grid"


def pinn_name(dtype):
    return f"PINN Poisson Adam step, {dtype}"


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
    ap.add_argument("--only", default="", metavar="SUBSTRING",
                    help='run only the workloads whose name contains SUBSTRING (the grid: "latency grid")')
    return ap


def wanted(args, workload):
    """Whether --only keeps this workload (harness.GRID for the latency grid)."""
    return args.only in workload


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
