#!/usr/bin/python3
"""Plots the grids written by examples/pinn (--csv): the network's u, the exact solution and the error.

usage: /usr/bin/python3 examples/pinn/plot.py <grid.csv> [<grid.csv> ...] <out.png>
One row of panels per CSV (e.g. the Poisson run and the heat run).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def load(path):
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        data = np.array([[float(v) for v in row] for row in reader])
    if data.size == 0:
        sys.exit(f"{path}: no rows")
    g = int(round(np.sqrt(len(data))))
    if g * g != len(data):
        sys.exit(f"{path}: {len(data)} rows is not a square grid")
    return header, data.reshape(g, g, 4)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    srcs, dst = sys.argv[1:-1], sys.argv[-1]
    fig, axes = plt.subplots(len(srcs), 3, figsize=(11, 3.3 * len(srcs)), squeeze=False)
    for row, src in zip(axes, srcs):
        header, d = load(src)
        x, y, u, exact = d[..., 0], d[..., 1], d[..., 2], d[..., 3]
        err = u - exact
        rel = np.sqrt((err ** 2).sum() / (exact ** 2).sum())
        title = "heat u_t = 0.1 u_xx" if header[1] == "t" else "Poisson -Lap u = f"
        for ax, field, name, cmap in ((row[0], u, "network u", "viridis"), (row[1], exact, "exact u", "viridis"),
                                      (row[2], err, f"u - exact (rel. L2 {rel:.2e})", "RdBu_r")):
            lim = np.abs(field).max() if cmap == "RdBu_r" else None
            im = ax.pcolormesh(x, y, field, shading="auto", cmap=cmap,
                               vmin=-lim if lim else None, vmax=lim if lim else None)
            ax.set_title(f"{title}: {name}", fontsize=9)
            ax.set_xlabel(header[0])
            ax.set_ylabel(header[1])
            ax.set_aspect("equal")
            fig.colorbar(im, ax=ax, shrink=0.85)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
