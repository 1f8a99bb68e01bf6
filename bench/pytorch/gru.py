#!/usr/bin/env python3
"""The PyTorch (Python) side of bench/gru_bench.cpp: nn.GRU(4, 32, batch_first=True) reading 50 steps,
its last output into nn.Linear(32, 1); a training step (MSE + Adam) on a batch of 256 sequences and
inference on one sequence under no_grad, with the timing of bench/pytorch/compare.py (warm-up excluded,
medians of rounds). The workload names are those of chainlet_gru_bench.

    /usr/bin/python3 bench/pytorch/gru.py [--quick] [--threads T] --json FILE
"""
import argparse
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from compare import blas_library, measure


class GruNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 32, batch_first=True)
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        output, _ = self.gru(x)
        return self.head(output[:, -1])


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
    x, y = torch.randn(256, 50, 4), torch.randn(256, 1)
    x1 = x[:1].clone()
    for t in thread_counts:
        model = GruNet()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()

        def infer():
            with torch.no_grad():
                model(x1)
        measure("gru32 T50 F4 train step (batch 256, Adam)", t, step, rounds, target, rows)
        measure("gru32 T50 F4 inference (one sequence)", t, infer, rounds, target, rows)
    with open(a.json, "w") as f:
        json.dump({"pytorch": torch.__version__, "blas": blas_library(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
