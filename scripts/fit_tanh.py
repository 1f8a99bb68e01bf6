#!/usr/bin/env python3
"""Fits the float tanhs of include/chainlet/kernels/simd.hpp and prints their coefficients.

simd::tanh writes |x| = a + b with a a multiple of 1/2 and |b| <= 1/4, and combines tanh a (a table of
tanh(k / 2), k = 0 .. 31, rounded to float) with tanh b by tanh(a + b) = (tanh a + tanh b) / (1 + tanh a tanh b).
tanh b ~ b + b t (c1 + c2 t + c3 t^2), t = b^2, minimising the largest relative error on 0 < b <= 1/4:
Lawson's iteratively reweighted least squares. Prints the table and the coefficients as float literals.

--rational: the form of builds without AVX-512, tanh x ~ x P(t) / Q(t), t = x^2, on |x| <= 8, P and Q of
degree 4, P(0) = Q(0), minimising the largest relative error (Lawson on the linearised error
(P - f Q) / (f Q_previous), f(t) = tanh(sqrt t) / sqrt t, in u = t / T for conditioning), scaled so that
P is monic (its first Horner step is then an addition).
Usage: scripts/fit_tanh.py [--half-width 0.25] [--degree 3]
       scripts/fit_tanh.py --rational [--bound 8] [--degree 4]      (numpy only)
"""
import argparse
import math

import numpy as np


def fit(half_width, degree, iterations=300, points=20000):
    b = np.linspace(half_width / points, half_width, points)
    t = b * b
    f = np.tanh(b)
    basis = np.vstack([b * t**(i + 1) for i in range(degree)]).T  # tanh b - b = b t (c1 + c2 t + ...)
    weight, best = np.ones_like(b), (np.inf, None)
    for _ in range(iterations):
        scale = weight / f  # relative error
        c, *_ = np.linalg.lstsq(basis * scale[:, None], (f - b) * scale, rcond=None)
        error = (b + basis @ c - f) / f
        worst = np.max(np.abs(error))
        if worst < best[0]:
            best = (worst, c)
        weight = np.maximum(weight * np.sqrt(np.abs(error)), 1e-30)
        weight /= weight.max()
    return best


def fit_rational(degree, t_max, iterations=400, points=8000):
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
    parser.add_argument("--rational", action="store_true", help="fit the rational form (builds without AVX-512)")
    parser.add_argument("--half-width", type=float, default=0.25, help="largest |b| (half the table's step)")
    parser.add_argument("--bound", type=float, default=8.0, help="--rational: fit on |x| <= bound (the clamp)")
    parser.add_argument("--degree", type=int, help="coefficients c1 .. c_degree (3), or the degree of P and Q (4)")
    args = parser.parse_args()
    if args.rational:
        worst, p, q = fit_rational(args.degree or 4, args.bound**2)
        print(f"largest relative error before rounding: {worst:.3g}")
        print("P (t^0 first):", ", ".join(f"{np.float32(c):.9g}f" for c in p))
        print("Q (t^0 first):", ", ".join(f"{np.float32(c):.9g}f" for c in q))
        return
    args.degree = args.degree or 3
    worst, c = fit(args.half_width, args.degree)
    step = 2 * args.half_width
    print(f"largest relative error of tanh b before rounding: {worst:.3g}")
    print("c (c1 first):", ", ".join(f"{np.float32(x):.9g}f" for x in c))
    print(f"table, tanh(k * {step:g}) for k = 0 .. 31:")
    print(", ".join(f"{np.float32(math.tanh(k * step)):.9g}f" for k in range(32)))


if __name__ == "__main__":
    main()
