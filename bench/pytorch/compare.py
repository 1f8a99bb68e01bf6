#!/usr/bin/env python3
"""The PyTorch (Python) side of chainlet's benchmarks: the workloads of bench/compare.cpp, with the
same models, batches, optimisers and thread counts, data in memory, warm-up excluded, medians of
rounds. Writes one JSON object per (workload, threads) row.

    /usr/bin/python3 bench/pytorch/compare.py [--quick] [--threads T] --json FILE
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def per_call(f, target, iters=None):
    """Seconds per call of f over a block of calls sized to take about `target` seconds."""
    if iters is None:
        k = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(k):
                f()
            t = time.perf_counter() - t0
            if t > target / 4 or k > (1 << 24):
                iters = max(1, int(k * target / t))
                break
            k *= 4
    t0 = time.perf_counter()
    for _ in range(iters):
        f()
    return (time.perf_counter() - t0) / iters, iters


def measure(name, threads, step, rounds, target, rows):
    torch.set_num_threads(threads)
    _, iters = per_call(step, target / 2)  # warm-up, sizes the blocks
    times = [per_call(step, target, iters)[0] for _ in range(rounds)]
    seconds = statistics.median(times)
    rows.append({"workload": name, "threads": threads, "pytorch_seconds": seconds})
    print(f"{name:<46} {threads:3d}  {seconds * 1e6:14.3f} us", flush=True)


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def lenet5():
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 120), nn.ReLU(), nn.Linear(120, 84),
                         nn.ReLU(), nn.Linear(84, 10))


def blas_library():
    """The BLAS this process really uses: Debian's torch links the generic libblas.so.3, which the
    alternatives system points at OpenBLAS (or at the slow reference BLAS when OpenBLAS is missing)."""
    torch.randn(64, 64) @ torch.randn(64, 64)
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line}
    return ", ".join(sorted(os.path.realpath(l) for l in libs)) or "none mapped"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    rounds, target = (3, 0.05) if a.quick else (7, 0.2)
    thread_counts = [1] + ([a.threads] if a.threads > 1 else [])
    torch.manual_seed(0)
    rows = []
    print(f"pytorch {torch.__version__}, BLAS: {blas_library()}")

    # 1. tiny MLP, full-batch Adam step on 10,000 samples
    x, y = torch.randn(10000, 4), torch.randn(10000, 4)
    for t in thread_counts:
        model = mlp([4, 32, 16, 4])
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
        measure("tiny MLP train step, 10k samples", t, step, rounds, target, rows)

    # 2. tiny MLP, one sample
    model = mlp([4, 32, 16, 4])
    x1, y1 = torch.randn(1, 4), torch.randn(1, 4)

    def forward():
        with torch.no_grad():
            model(x1)

    def forward_pullback():
        model.zero_grad()
        F.mse_loss(model(x1), y1).backward()
    for t in thread_counts:
        measure("tiny MLP forward, 1 sample", t, forward, rounds, target, rows)
        measure("tiny MLP forward+pullback, 1 sample", t, forward_pullback, rounds, target, rows)

    # 3. wide MLP 2 -> 64 -> 64 -> 2, Adam step at batch 1, 32, 256
    for n in (1, 32, 256):
        xw, yw = torch.randn(n, 2), torch.randn(n, 2)
        for t in thread_counts:
            model = mlp([2, 64, 64, 2])
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)

            def step():
                opt.zero_grad()
                F.mse_loss(model(xw), yw).backward()
                opt.step()
            measure(f"wide MLP train step, batch {n}", t, step, rounds, target, rows)

    # 4. LeNet5: a training epoch (batch 2048, Adam(3e-4), no shuffling) and inference on 10,000 images
    n = 8192 if a.quick else 60000
    images = "8192 images" if a.quick else "60k images"
    xl, yl = torch.randn(n, 1, 28, 28), torch.arange(n) % 10
    xt = torch.randn(10000, 1, 28, 28)
    for t in thread_counts:
        model = lenet5()
        opt = torch.optim.Adam(model.parameters(), lr=3e-4)

        def epoch():
            for b0 in range(0, n, 2048):
                opt.zero_grad()
                F.cross_entropy(model(xl[b0:b0 + 2048]), yl[b0:b0 + 2048]).backward()
                opt.step()

        def infer():
            with torch.no_grad():
                model(xt)
        measure(f"LeNet5 train epoch, {images}, batch 2048", t, epoch, rounds, target, rows)
        measure("LeNet5 inference, 10k images", t, infer, rounds, target, rows)

    with open(a.json, "w") as f:
        json.dump({"pytorch": torch.__version__, "blas": blas_library(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
