#!/usr/bin/python3
"""Plots the CSV of examples/neural_ode: true, observed and fitted prey/predator trajectories.

usage: /usr/bin/python3 examples/neural_ode/plot.py [neural_ode.csv] [neural_ode.png]
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "neural_ode.csv"
    dst = sys.argv[2] if len(sys.argv) > 2 else "neural_ode.png"
    rows = {}
    with open(src, newline="") as f:
        for r in csv.DictReader(f):
            rows.setdefault(int(r["trajectory"]), []).append({k: float(v) for k, v in r.items()})
    if not rows:
        sys.exit(f"{src}: no rows")
    n = len(rows)
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 3.0), sharey=True, squeeze=False)
    for ax, (k, traj) in zip(axes[0], sorted(rows.items())):
        t = [r["t"] for r in traj]
        t_end = max(r["t"] for r in traj if r["train"] == 1)
        obs = [r for r in traj if r["train"] == 1]
        for var, colour, name in (("x", "tab:blue", "prey"), ("y", "tab:red", "predator")):
            ax.plot(t, [r[f"{var}_true"] for r in traj], color=colour, lw=3, alpha=0.35, label=f"{name}, true")
            ax.plot(t, [r[f"{var}_fit"] for r in traj], color=colour, lw=1.2, ls="--", label=f"{name}, fitted")
            ax.plot([r["t"] for r in obs], [r[f"{var}_obs"] for r in obs], ".", color=colour, ms=3,
                    label=f"{name}, observed")
        ax.axvspan(t_end, t[-1], color="0.92", zorder=0)
        ax.set_title(f"trajectory {k}", fontsize=9)
        ax.set_xlabel("t (grey: beyond the training window)", fontsize=8)
    axes[0][0].set_ylabel("population")
    axes[0][0].legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    fig.savefig(dst, dpi=80)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
