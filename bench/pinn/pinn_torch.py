#!/usr/bin/env python3
"""The PINN Adam step of bench/pinn_bench.cpp in PyTorch eager: 2-D Poisson, MLP 2-32-32-32-1 tanh,
1,024 interior points (Laplacian by torch.autograd.grad(..., create_graph=True), twice) + 256 boundary
points, loss mean (Lap u + f)^2 + mean u^2, backward, Adam(1e-3).

  python pinn_torch.py --dtype float32|float64 --threads N [--steps S] [--repeats R]
Prints one JSON line {system, dtype, threads, ms_per_step, cpu_ms_per_step (process CPU time)} (best of R repeats of S steps).
"""
import argparse
import json
import math
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dt = getattr(torch, a.dtype)
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                              torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).to(dt)
    xi = torch.rand(1024, 2, dtype=dt)
    r = torch.rand(256, dtype=dt)
    side = torch.arange(256) % 4
    xb = torch.stack([torch.where(side == 1, 0.0, torch.where(side == 2, 1.0, r)).to(dt),
                      torch.where(side == 0, 0.0, torch.where(side == 3, 1.0, r)).to(dt)], 1)
    f = 2 * math.pi ** 2 * torch.sin(math.pi * xi[:, 0]) * torch.sin(math.pi * xi[:, 1])
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def step():
        x = xi.clone().requires_grad_(True)
        u = net(x)
        (du,) = torch.autograd.grad(u.sum(), x, create_graph=True)
        lap = 0
        for i in range(2):
            (d2,) = torch.autograd.grad(du[:, i].sum(), x, create_graph=True)
            lap = lap + d2[:, i]
        loss = ((lap + f) ** 2).mean() + (net(xb) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(10):
        step()
    best = cpu_best = math.inf
    for _ in range(a.repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        best = min(best, (time.perf_counter() - t0) / a.steps)
        cpu_best = min(cpu_best, (time.process_time() - c0) / a.steps)
    print(json.dumps({"system": f"pytorch {torch.__version__} eager", "dtype": a.dtype, "threads": a.threads,
                      "ms_per_step": round(1e3 * best, 4),
                      "cpu_ms_per_step": round(1e3 * cpu_best, 4)}))


if __name__ == "__main__":
    main()
