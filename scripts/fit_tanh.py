#!/usr/bin/env python3
"""Fits the float tanh of include/chainlet/kernels/simd.hpp and prints its table and coefficients.

simd::tanh writes |x| = a + b with a a multiple of 1/2 and |b| <= 1/4, and combines tanh a (a table of
tanh(k / 2), k = 0 .. 31, rounded to float) with tanh b by tanh(a + b) = (tanh a + tanh b) / (1 + tanh a tanh b).
tanh b ~ b + b t (c1 + c2 t + c3 t^2), t = b^2, minimising the largest relative error on 0 < b <= 1/4:
Lawson's iteratively reweighted least squares. Prints the table and the coefficients as float literals.
Usage: scripts/fit_tanh.py [--half-width 0.25] [--degree 3]   (numpy only)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half-width", type=float, default=0.25, help="largest |b| (half the table's step)")
    parser.add_argument("--degree", type=int, default=3, help="coefficients c1 .. c_degree")
    args = parser.parse_args()
    worst, c = fit(args.half_width, args.degree)
    step = 2 * args.half_width
    print(f"largest relative error of tanh b before rounding: {worst:.3g}")
    print("c (c1 first):", ", ".join(f"{np.float32(x):.9g}f" for x in c))
    print(f"table, tanh(k * {step:g}) for k = 0 .. 31:")
    print(", ".join(f"{np.float32(math.tanh(k * step)):.9g}f" for k in range(32)))


if __name__ == "__main__":
    main()
