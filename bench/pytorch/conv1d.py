#!/usr/bin/env python3
"""PyTorch side of bench/conv1d_bench.cpp (issue 13): the same Conv1D models, batch 256 of sequences
(4 channels x 64 steps; PyTorch's (C, L) layout), Adam(1e-3), mean squared error, the same thread
counts and timing rules (data in memory, warm-up excluded, blocks of ~0.2 s, median of 7 rounds).

    /usr/bin/python3 bench/pytorch/conv1d.py [--quick] [--threads T]
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def per_call(f, target, iters=None):
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


def measure(name, threads, step, rounds, target):
    torch.set_num_threads(threads)
    _, iters = per_call(step, target / 2)
    seconds = statistics.median(per_call(step, target, iters)[0] for _ in range(rounds))
    print(f"{name:<46} {threads:3d}  {seconds * 1e6:12.3f} us", flush=True)


def conv1d_net():  # chainlet: Conv1D<5,16,ReLU,same> MaxPool1D<2> Conv1D<5,32,ReLU,same> MaxPool1D<2> GlobalAvgPool Dense<4>
    return nn.Sequential(nn.Conv1d(4, 16, 5, padding="same"), nn.ReLU(), nn.MaxPool1d(2),
                         nn.Conv1d(16, 32, 5, padding="same"), nn.ReLU(), nn.MaxPool1d(2),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 4))


def strided_conv1d_net():  # chainlet: Conv1D<5,16,ReLU,same,1,2> Conv1D<4,32,ReLU,valid,2> GlobalAvgPool Dense<4>
    return nn.Sequential(nn.Conv1d(4, 16, 5, padding="same", dilation=2), nn.ReLU(),
                         nn.Conv1d(16, 32, 4, stride=2), nn.ReLU(),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    rounds, target = (3, 0.05) if a.quick else (7, 0.2)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}")
    x, y = torch.randn(256, 4, 64), torch.randn(256, 4)
    for threads in [1] + ([a.threads] if a.threads > 1 else []):
        for name, build in [("conv1d net train step, batch 256", conv1d_net),
                            ("strided conv1d net train step, batch 256", strided_conv1d_net)]:
            model = build()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)

            def step():
                opt.zero_grad()
                loss = F.mse_loss(model(x), y)
                loss.backward()
                opt.step()

            measure(name, threads, step, rounds, target)
        model, x1 = conv1d_net(), torch.randn(1, 4, 64)

        def forward():
            with torch.no_grad():
                model(x1)

        measure("conv1d net forward, 1 sequence", threads, forward, rounds, target)


if __name__ == "__main__":
    main()
