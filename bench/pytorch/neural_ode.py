#!/usr/bin/python3
"""PyTorch twin of examples/neural_ode, for timing one training iteration.

Same problem sizes (4 Lotka-Volterra trajectories, 80 fixed RK4 steps of 0.05 observed every 2 steps),
same model (u' = A u + MLP(u), MLP 2 -> 32 tanh -> 32 tanh -> 2 in float64), same loss (mean squared
error at the observations) and Adam. One iteration = zero the gradients, integrate through the 80 RK4
steps, loss.backward() (autograd through the integrator: the discrete adjoint), Adam step. One thread.

    /usr/bin/python3 bench/pytorch/neural_ode.py [--warmup 20] [--iterations 200] [--train 0]

Prints `us_per_iteration_median=<v> us_per_iteration_mean=<v>`; with --train N it first trains N
iterations and prints the loss drop (a check that the twin solves the same problem).
"""
import argparse
import statistics
import time

import numpy as np
import torch
import torch.nn as nn

ALPHA, BETA, GAMMA, DELTA = 1.3, 0.9, 0.8, 1.8
K, STEPS, OBS_EVERY, H = 4, 80, 2, 0.05


def rk4_step(f, u, h):
    k1 = f(u)
    k2 = f(u + 0.5 * h * k1)
    k3 = f(u + 0.5 * h * k2)
    k4 = f(u + h * k3)
    return u + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def make_data(seed, sigma=0.02, fine=50):
    rng = np.random.default_rng(seed)
    u = torch.tensor(0.5 + 1.5 * rng.random((K, 2)), dtype=torch.float64)

    def true_rhs(u):
        x, y = u[:, 0], u[:, 1]
        return torch.stack([ALPHA * x - BETA * x * y, DELTA * x * y - GAMMA * y], dim=1)

    obs = [u]
    for n in range(1, STEPS + 1):
        for _ in range(fine):
            u = rk4_step(true_rhs, u, H / fine)
        if n % OBS_EVERY == 0:
            obs.append(u)
    obs = torch.stack(obs)
    return obs + sigma * torch.tensor(rng.standard_normal(obs.shape), dtype=torch.float64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--train", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    observed = make_data(a.seed)
    mlp = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 2)).double()
    with torch.no_grad():  # as in the C++ example: start near the known part alone
        mlp[4].weight.mul_(0.1)
        mlp[4].bias.zero_()
    known = torch.tensor([ALPHA, -GAMMA], dtype=torch.float64)

    def rhs(u):
        return known * u + mlp(u)

    def loss_fn():
        u = observed[0]
        total = 0
        for n in range(1, STEPS + 1):
            u = rk4_step(rhs, u, H)
            if n % OBS_EVERY == 0:
                total = total + ((u - observed[n // OBS_EVERY]) ** 2).sum()
        return total / ((STEPS // OBS_EVERY) * K * 2)

    opt = torch.optim.Adam(mlp.parameters(), lr=0.03)

    def iteration():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss.item()

    if a.train:
        first = iteration()
        last = first
        for _ in range(a.train - 1):
            last = iteration()
        print(f"trained {a.train} iterations: loss {first:.6e} -> {last:.6e} ({first / last:.1f}x)")

    for _ in range(a.warmup):
        iteration()
    times = []
    for _ in range(a.iterations):
        t0 = time.perf_counter()
        iteration()
        times.append(time.perf_counter() - t0)
    print(f"torch {torch.__version__} threads={torch.get_num_threads()} float64 iterations={a.iterations} "
          f"us_per_iteration_median={1e6 * statistics.median(times):.1f} "
          f"us_per_iteration_mean={1e6 * statistics.fmean(times):.1f}")


if __name__ == "__main__":
    main()
