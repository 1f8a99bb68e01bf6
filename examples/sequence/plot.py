#!/usr/bin/python3
"""Plots the CSV of examples/sequence: a test trajectory of the forced damped pendulum (never trained
on), the GRU's one-step predictions from true windows, and its closed-loop rollout.

usage: /usr/bin/python3 examples/sequence/plot.py [sequence.csv] [sequence.png]
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WINDOW = 50  # observations the GRU reads before its first prediction


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "sequence.csv"
    dst = sys.argv[2] if len(sys.argv) > 2 else "sequence.png"
    with open(src, newline="") as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    if len(rows) <= WINDOW:
        sys.exit(f"{src}: {len(rows)} rows, need more than {WINDOW}")
    t = [r["t"] for r in rows]
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 4.6), sharex=True)
    for ax, var, label in ((axes[0], "theta", "angle θ"), (axes[1], "omega", "velocity θ'")):
        ax.plot(t, [r[f"{var}_true"] for r in rows], color="0.2", lw=3, alpha=0.3, label="truth (RK4)")
        ax.plot(t[WINDOW:], [r[f"{var}_onestep"] for r in rows[WINDOW:]], ".", color="tab:blue", ms=2.5,
                label="one step ahead")
        ax.plot(t[WINDOW:], [r[f"{var}_rollout"] for r in rows[WINDOW:]], color="tab:red", lw=1.1, ls="--",
                label="closed loop (own predictions fed back)")
        ax.axvspan(t[0], t[WINDOW - 1], color="0.92", zorder=0)
        ax.set_ylabel(label)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=3, frameon=False)
    axes[0].set_title("GRU<32> surrogate of a forced damped pendulum, a test trajectory "
                      "(grey: the first window)", fontsize=9)
    axes[1].set_xlabel("t")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(dst, dpi=80)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
