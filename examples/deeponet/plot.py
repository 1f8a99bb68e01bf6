#!/usr/bin/env python3
"""Plots examples/deeponet's test predictions: u (dashed), the exact antiderivative G(u) and the DeepONet
prediction, for the first four unseen functions.

  python3 examples/deeponet/plot.py deeponet_predictions.csv docs/deeponet.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2] if len(sys.argv) > 2 else "deeponet.png"
functions = sorted({int(r["function"]) for r in rows})
fig, axes = plt.subplots(1, len(functions), figsize=(3.2 * len(functions), 3.0), sharey=True)
for ax, f in zip(axes, functions):
    rs = [r for r in rows if int(r["function"]) == f]
    y = [float(r["y"]) for r in rs]
    ax.plot(y, [float(r["u"]) for r in rs], "--", color="0.6", label="u(y)")
    ax.plot(y, [float(r["G"]) for r in rs], color="k", label="G(u)(y) exact")
    ax.plot(y, [float(r["prediction"]) for r in rs], ":", color="tab:red", lw=2, label="DeepONet")
    ax.set_xlabel("y")
    ax.set_title(f"test function {f}")
axes[0].legend(fontsize=8)
fig.suptitle("DeepONet: antiderivative operator on unseen functions")
fig.tight_layout()
fig.savefig(out, dpi=110)
print(f"wrote {out}")
