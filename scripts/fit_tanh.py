#!/usr/bin/env python3
"""Fits the float tanh of include/chainlet/kernels/simd.hpp and prints its coefficients.

tanh x ~ x P(t) / Q(t), t = x^2, on |x| <= 8, P and Q of degree 4, P(0) = Q(0), minimising the largest
relative error: Lawson's iteratively reweighted least squares on the linearised error
(P - f Q) / (f Q_previous), f(t) = tanh(sqrt t) / sqrt t, in u = t / T for conditioning. The result is
scaled so that P is monic (its first Horner step is then an addition) and printed as float literals.
Usage: scripts/fit_tanh.py [--bound 8] [--degree 4]   (numpy only)
"""
import argparse

import numpy as np


def fit(degree, t_max, iterations=400, points=8000):
    u = np.cos(np.linspace(0, np.pi, points)) * 0.5 + 0.5  # Chebyshev-like nodes on [0, 1]
    t = t_max * u
    s = np.sqrt(t)
    f = np.where(t > 0, np.tanh(s) / np.where(s > 0, s, 1), 1.0)
    powers = np.vstack([u**i for i in range(1, degree + 1)]).T  # P = 1 + powers a, Q = 1 + powers b
    weight, q_previous, best = np.ones_like(u), np.ones_like(u), (np.inf, None)
    for _ in range(iterations):
        a = np.hstack([powers, -f[:, None] * powers]) / (f * q_previous)[:, None]
        b = (f - 1) / (f * q_previous)
        root = np.sqrt(weight)
        x, *_ = np.linalg.lstsq(a * root[:, None], b * root, rcond=None)
        p, q = 1 + powers @ x[:degree], 1 + powers @ x[degree:]
        error = (p / q - f) / f
        worst = np.max(np.abs(error))
        if worst < best[0]:
            best = (worst, x.copy())
        weight = np.maximum(weight * np.sqrt(np.abs(error)), 1e-30)
        weight /= weight.max()
        q_previous = q
    worst, x = best
    p = [1.0] + [x[i] / t_max ** (i + 1) for i in range(degree)]
    q = [1.0] + [x[degree + i] / t_max ** (i + 1) for i in range(degree)]
    return worst, [c / p[-1] for c in p], [c / p[-1] for c in q]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bound", type=float, default=8.0, help="fit on |x| <= bound (the clamp)")
    parser.add_argument("--degree", type=int, default=4, help="degree of P and Q in t = x^2")
    args = parser.parse_args()
    worst, p, q = fit(args.degree, args.bound**2)
    print(f"largest relative error before rounding: {worst:.3g}")
    print("P (t^0 first):", ", ".join(f"{np.float32(c):.9g}f" for c in p))
    print("Q (t^0 first):", ", ".join(f"{np.float32(c):.9g}f" for c in q))


if __name__ == "__main__":
    main()
