#!/usr/bin/env python3
"""Merges the measurements of one bench/compare.sh run into docs/benchmarks.md, docs/benchmarks.json,
docs/benchmarks-details.json, docs/benchmarks.png and docs/latency_grid.png.

    report.py RESULTS_DIR OUTDIR

RESULTS_DIR holds, per thread count T, the JSON of each process (missing ones become "not run" cells):
  libtorch2-T.json    chainlet_compare_torch2: chainlet and LibTorch 2.x alternating in one process
  libtorch113-T.json  chainlet_compare: chainlet and Debian's LibTorch 1.13 alternating in one process
  pytorch2-T.json     bench/pytorch/compare.py on the wheel: eager, channels_last, torch.compile
  jax-T.json, onnxruntime-T.json, pytorch113-T.json (Debian's python3-torch; the full run only)
  native-R-T.json, avx2-R-T.json  chainlet_compare --chainlet-only of the native and of the AVX2 build
                      (CHAINLET_SIMD=avx2), run in turn R = 1, 2, ...: the AVX2 column
and run.json (written by compare.sh: quick flag, load averages, wall time, notes such as build failures).
"""
import glob
import json
import os
import platform
import re
import subprocess
import sys
from datetime import date

# Display names, in column order. "Today's frameworks" are the ones the best-of ratio is taken over.
FRAMEWORKS = [
    ("libtorch2", "LibTorch 2.13"),
    ("pytorch_eager", "PyTorch 2.13 eager"),
    ("pytorch_channels_last", "PyTorch 2.13 channels_last"),
    ("pytorch_compile", "PyTorch 2.13 torch.compile"),
    ("jax", "JAX 0.10 jit"),
    ("onnxruntime", "ONNX Runtime 1.30"),
    ("libtorch113", "LibTorch 1.13 (Debian)"),
    ("pytorch113", "PyTorch 1.13 (Debian)"),
]
TODAY = ["libtorch2", "pytorch_eager", "pytorch_channels_last", "pytorch_compile", "jax", "onnxruntime"]
PYTORCH2 = ["pytorch_eager", "pytorch_channels_last", "pytorch_compile"]
NAME = dict(FRAMEWORKS, chainlet="chainlet", pytorch_best="PyTorch 2.13 best")

# (workload prefix, threads, minimum ratio, over what) — issue 15's targets, against today's frameworks.
TARGETS = [
    ("tiny MLP train step", 1, 3.0, "best"),
    ("tiny MLP train step", 2, 3.0, "best"),
    ("tiny MLP forward, 1 sample", 1, 50.0, "best"),
    ("tiny MLP forward, 1 sample", 2, 50.0, "best"),
    ("tiny MLP forward+pullback, 1 sample", 1, 100.0, "best"),
    ("tiny MLP forward+pullback, 1 sample", 2, 100.0, "best"),
    ("LeNet5 train epoch", 1, 3.0, "best"),
    ("LeNet5 train epoch", 2, 3.0, "best"),
    ("LeNet5 inference", 1, 3.0, "onnxruntime"),
    ("LeNet5 inference", 2, 3.0, "onnxruntime"),
]
# Issue 14's PINN targets: (workload, threads, minimum ratio, over what), 1 thread, float32 and float64.
TARGETS_PINN = [(f"PINN Poisson Adam step, {d}", 1, r, over) for d in ("float32", "float64")
                for r, over in ((5.0, "pytorch_eager"), (2.0, "jax"))]
# Fractions of the FMA peak (issue 16; the PINN step: issue 14), and issue 16's one-sample latency.
TARGETS_PEAK = [
    ("tiny MLP train step", 1, 0.70), ("tiny MLP train step", 2, 0.60),
    ("LeNet5 train epoch", 1, 0.75), ("LeNet5 train epoch", 2, 0.75),
    ("LeNet5 inference", 1, 0.80), ("LeNet5 inference", 2, 0.80),
    ("PINN Poisson Adam step, float32", 1, 0.60),
]
TARGETS_LATENCY = [("tiny MLP forward+pullback, 1 sample", 1, 0.2e-6)]
# The targets held against Debian's LibTorch 1.13 before issue 15 (kept for continuity).
TARGETS_113 = [
    ("tiny MLP train step", 2, 6.0), ("tiny MLP train step", 1, 5.0), ("tiny MLP forward, 1 sample", 1, 50.0),
    ("tiny MLP forward+pullback, 1 sample", 1, 100.0), ("LeNet5 train epoch", 2, 3.0), ("LeNet5 train epoch", 1, 4.0),
]
FIRST_STEP = ["tiny MLP train step, 10k samples", "tiny MLP forward, 1 sample", "LeNet5 train step, batch 2048",
              "LeNet5 inference, 10k images", "LeNet5 inference, 2048 images"]  # the last: --quick


def fmt_time(s):
    if s is None:
        return "—"
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def fmt_ratio(r):
    return "—" if r is None else (f"{r:.0f}x" if r >= 100 else f"{r:.1f}x")


def fmt_speed(r):
    """A speed relative to another build's, to two decimals (0.90x and 0.89x differ)."""
    return "—" if r is None else f"{r:.2f}x"


def package_version(name):
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True)
        return out.stdout.strip() or "not installed"
    except OSError:
        return "unknown"


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def main():
    results, outdir = sys.argv[1:3]
    run = load(os.path.join(results, "run.json")) or {}
    threads = sorted({int(m.group(1)) for p in glob.glob(os.path.join(results, "*-*.json"))
                      if (m := re.search(r"-(\d+)\.json$", p))})
    cpp2 = {t: load(os.path.join(results, f"libtorch2-{t}.json")) for t in threads}
    cpp113 = {t: load(os.path.join(results, f"libtorch113-{t}.json")) for t in threads}
    py = {(fw, t): load(os.path.join(results, f"{fw}-{t}.json"))
          for fw in ("pytorch2", "jax", "onnxruntime", "pytorch113") for t in threads}

    # seconds[(workload, threads)][framework]; chainlet's time is the one measured next to LibTorch 2.13
    # (next to LibTorch 1.13 when the LibTorch 2.13 program was not built).
    seconds, order, peaks, grid, first = {}, [], {}, {}, []
    for t in threads:
        main_cpp = cpp2[t] or cpp113[t]
        if main_cpp is None:
            sys.exit(f"report.py: no chainlet_compare results for {t} thread(s) in {results}")
        peaks[t] = main_cpp["peak_gflops"][str(t)]
        for r in main_cpp["rows"]:
            key = (r["workload"], t)
            order.append(key)
            seconds[key] = {"chainlet": r["chainlet_seconds"], "flops": r["flops"], "dtype": r.get("dtype", "float32")}
        for g in main_cpp.get("grid", []):
            grid.setdefault((g["model"], t), {}).setdefault("chainlet", {})[g["batch"]] = g["chainlet_seconds"]
        for f in main_cpp.get("first_step", []):
            first.append({**f, "framework": "chainlet" if f["framework"] == "chainlet" else
                          ("libtorch2" if cpp2[t] else "libtorch113")})
        for fw, data in (("libtorch2", cpp2[t]), ("libtorch113", cpp113[t])):
            if data is None:
                continue
            for r in data["rows"]:
                seconds.setdefault((r["workload"], t), {})[fw] = r["libtorch_seconds"]
                seconds[(r["workload"], t)][fw + "_own_chainlet"] = r["chainlet_seconds"]
            for g in data.get("grid", []):
                grid.setdefault((g["model"], t), {}).setdefault(fw, {})[g["batch"]] = g["libtorch_seconds"]
            if data is not main_cpp:
                first += [{**f, "framework": fw} for f in data.get("first_step", []) if f["framework"] == "libtorch"]
        for name in ("pytorch2", "jax", "onnxruntime", "pytorch113"):
            data = py[(name, t)]
            if data is None:
                continue
            for r in data["rows"]:
                seconds.setdefault((r["workload"], t), {})[r["framework"]] = r["seconds"]
            for g in data["grid"]:
                grid.setdefault((g["model"], t), {}).setdefault(g["framework"], {})[g["batch"]] = g["seconds"]
            first += data["first_step"]

    rows = []
    for key in order:
        s = seconds[key]
        c = s["chainlet"]
        pt_best = min(((s[k], k) for k in PYTORCH2 if k in s), default=(None, None))
        best = min(((s[k], k) for k in TODAY if k in s), default=(None, None))
        gflops = s["flops"] / c / 1e9 if s["flops"] > 0 else None
        # float64 runs half the lanes of float32: its peak is half the measured fp32 FMA peak.
        peak = peaks[key[1]] / (2 if s["dtype"] == "float64" else 1)

        def ratio(k):
            return s[k] / c if s.get(k) else None
        row = {
            # today's fields (LibTorch / PyTorch are Debian's 1.13, as before issue 15)
            "workload": key[0], "threads": key[1],
            "chainlet_seconds": c, "libtorch_seconds": s.get("libtorch113"), "pytorch_seconds": s.get("pytorch113"),
            "ratio_libtorch": ratio("libtorch113"), "ratio_pytorch": ratio("pytorch113"),
            "gflops": gflops, "peak_fraction": gflops / peak if gflops else None, "dtype": s["dtype"],
        }
        for k in TODAY:
            row[f"{k}_seconds"] = s.get(k)
            row[f"ratio_{k}"] = ratio(k)
        row.update({
            "pytorch_best_seconds": pt_best[0], "pytorch_best_setting": pt_best[1],
            "ratio_pytorch_best": pt_best[0] / c if pt_best[0] else None,
            "best_seconds": best[0], "best_framework": best[1], "ratio_best": best[0] / c if best[0] else None,
            "ratio_libtorch113_same_process": (s["libtorch113"] / s["libtorch113_own_chainlet"]
                                               if s.get("libtorch113") else None),
        })
        rows.append(row)

    simd = simd_rows(results, threads)
    os.makedirs(outdir, exist_ok=True)
    meta = {name: {t: {k: v for k, v in (py[(name, t)] or {}).items() if k not in ("rows", "grid", "first_step")}
                   for t in threads} for name in ("pytorch2", "jax", "onnxruntime", "pytorch113")}
    with open(os.path.join(outdir, "benchmarks-details.json"), "w") as f:
        json.dump({"run": run, "peak_gflops": peaks, "frameworks": meta,
                   "grid": [{"model": m, "threads": t, "framework": fw, "batch": b, "seconds": v}
                            for (m, t), fws in grid.items() for fw, pts in fws.items() for b, v in sorted(pts.items())],
                   "first_step": first, "simd_builds": simd}, f, indent=1)

    any_cpp = next(d for d in list(cpp2.values()) + list(cpp113.values()) if d)
    torch2_version = next((d["libtorch"] for d in cpp2.values() if d), None)
    quick = run.get("quick", any_cpp.get("quick"))
    pm = meta["pytorch2"].get(threads[0], {})
    lines = [
        "# chainlet benchmarks",
        "",
        f"Generated by `bench/compare.sh{' --quick' if quick else ''}` on {date.today().isoformat()}"
        f"{' in ' + str(run['wall_seconds']) + ' s' if run.get('wall_seconds') else ''}. "
        "Regenerate with the same command on a fresh clone: it installs what it needs (Debian packages and "
        "the pinned wheels in `build/compare-venv`, see `scripts/install-deps.sh --compare`), builds both "
        "comparison programs and runs every framework below in one invocation.",
        "",
        "## Machine and versions",
        "",
        f"* CPU: {any_cpp['cpu']}, chainlet compiled for `{any_cpp['simd']}` with {any_cpp['compiler']}",
        "* fp32 FMA peak measured in this run: " + ", ".join(f"{v:.0f} GFLOP/s on {k} thread(s)" for k, v in peaks.items()),
        f"* LibTorch {torch2_version or 'not built'} (the C++ library inside the torch wheel, "
        f"`chainlet_compare_torch2`); LibTorch {next((d['libtorch'] for d in cpp113.values() if d), 'not built')} "
        f"(Debian libtorch-dev {package_version('libtorch-dev')}, `chainlet_compare`)",
        f"* PyTorch {pm.get('pytorch', 'not run')} (wheel; {pm.get('blas', '')}); torch.compile cache: "
        f"{run.get('inductor_cache', 'default')}",
        f"* JAX {meta['jax'].get(threads[0], {}).get('jax', 'not run')} with optax "
        f"{meta['jax'].get(threads[0], {}).get('optax', '')}; ONNX Runtime "
        f"{meta['onnxruntime'].get(threads[0], {}).get('onnxruntime', 'not run')}; PyTorch "
        f"{meta['pytorch113'].get(threads[0], {}).get('pytorch', 'not run (the full run only)')} (Debian python3-torch "
        f"with {meta['pytorch113'].get(threads[0], {}).get('blas', 'OpenBLAS')})",
        f"* {platform.platform()}; load averages (1/5/15 min) at the start of each process: "
        + "; ".join(f"{k}: {v}" for k, v in run.get("load", {}).items()),
    ]
    if run.get("process_seconds"):
        lines.append("* seconds per process: " + ", ".join(f"{k} {v}" for k, v in run["process_seconds"].items()))
    for note in run.get("notes", []):
        lines.append(f"* {note}")
    for name in ("pytorch2", "jax", "onnxruntime", "pytorch113"):
        for note in sorted({n for t in threads for n in meta[name].get(t, {}).get("notes", [])}):
            lines.append(f"* {name}: {note}")
    if 1 in peaks and 2 in peaks and peaks[2] < 1.5 * peaks[1]:
        lines.append(f"* **Warning: the 2-thread FMA peak ({peaks[2]:.0f} GFLOP/s) is under 1.5x the 1-thread peak "
                     f"({peaks[1]:.0f}): the second core was busy with other work during this run, so its 2-thread "
                     "rows measure contention (OpenMP barriers waiting for a descheduled thread), not the frameworks.**")

    def cell(s, k):
        return fmt_time(s.get(k)) if s.get(k) else "—"
    lines += ["", "## Times", "",
              "Medians per iteration. One column per framework; \"—\": the framework does not run this row "
              "(ONNX Runtime: inference only; channels_last: LeNet5 only; LibTorch and PyTorch 1.13: full run only).", "",
              "| workload | thr | chainlet | " + " | ".join(n for _, n in FRAMEWORKS) + " |",
              "|---|---|---|" + "---|" * len(FRAMEWORKS)]
    for r, key in zip(rows, order):
        s = seconds[key]
        lines.append(f"| {r['workload']} | {r['threads']} | {fmt_time(r['chainlet_seconds'])} | "
                     + " | ".join(cell(s, k) for k, _ in FRAMEWORKS) + " |")
    lines += ["", "## Ratios", "",
              "Other framework's time / chainlet's time (higher is better for chainlet). **vs best** is against "
              "the fastest of today's frameworks on that row (LibTorch 2.13, PyTorch 2.13 eager / channels_last "
              "/ torch.compile, JAX, ONNX Runtime where it applies), named in the next column. GFLOP/s count "
              "chainlet's useful multiply-adds x 2; % of the FMA peak measured in this run on as many threads.", "",
              "| workload | thr | **vs best** | best | vs LibTorch 2.13 | vs PyTorch 2.13 best | vs JAX | vs ONNX Runtime "
              "| vs LibTorch 1.13 | vs PyTorch 1.13 | chainlet GFLOP/s | of peak |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        gflops = "—" if r["gflops"] is None else f"{r['gflops']:.1f}"
        peak = "—" if r["peak_fraction"] is None else f"{100 * r['peak_fraction']:.0f} %"
        setting = f" ({NAME[r['pytorch_best_setting']].split()[-1]})" if r["pytorch_best_setting"] else ""
        lines.append(
            f"| {r['workload']} | {r['threads']} | **{fmt_ratio(r['ratio_best'])}** | {NAME.get(r['best_framework'], '—')} "
            f"| {fmt_ratio(r['ratio_libtorch2'])} | {fmt_ratio(r['ratio_pytorch_best'])}{setting} "
            f"| {fmt_ratio(r['ratio_jax'])} | {fmt_ratio(r['ratio_onnxruntime'])} | {fmt_ratio(r['ratio_libtorch'])} "
            f"| {fmt_ratio(r['ratio_pytorch'])} | {gflops} | {peak} |")

    def target_row(prefix, t):
        """The first row whose workload starts with prefix, at t threads; None where not measured."""
        return next((r for r in rows if r["workload"].startswith(prefix) and r["threads"] == t), None)

    def target_value(prefix, t, key):
        row = target_row(prefix, t)
        return None if row is None else row[key]

    def ratio_targets(targets):
        out = ["| figure | target | measured | | needed |", "|---|---|---|---|---|"]
        for prefix, t, target, over in targets:
            r = target_row(prefix, t)
            what = "the best of today's frameworks" if over == "best" else NAME[over]
            got = None if r is None else r[f"ratio_{over}"]
            if got is None:
                out.append(f"| {prefix}, {t} thread(s) | ≥ {target:g}x {what} | not measured | missed | |")
                continue
            verdict = "met" if got >= target else f"MISSED by {target / got:.2f}x"
            against = f" ({NAME.get(r['best_framework'], '')})" if over == "best" else ""
            needed_s = r["chainlet_seconds"] * got / target
            flops = seconds[(r["workload"], t)]["flops"]
            needed = fmt_time(needed_s)
            if flops > 0:
                peak = r["gflops"] / r["peak_fraction"]
                needed += f", {flops / needed_s / 1e9:.0f} GFLOP/s = {100 * flops / needed_s / 1e9 / peak:.0f} % of peak"
            out.append(f"| {prefix}, {t} thread(s) | ≥ {target:g}x {what} | {got:.1f}x{against} | {verdict} | "
                       f"{'' if got >= target else needed} |")
        return out

    if simd:
        native_simd = simd[0]["native_simd"]
        lines += ["", "## The AVX2 build", "",
                  f"chainlet built with `CHAINLET_SIMD=avx2` (256-bit vectors, FMA3: what a CPU without AVX-512 "
                  f"runs) against the native build (`{native_simd}`), chainlet's side only "
                  "(`chainlet_compare --chainlet-only`), the two programs run in turn "
                  f"{max(r['native_runs'] for r in simd)} time(s) each at every thread count; each cell is the "
                  "fastest of its program's runs. % of peak: of the fp32 FMA peak each program measured with its "
                  "own vectors (float64: half). **AVX2 / native** is the AVX2 build's speed as a fraction of the "
                  "native build's; the target is ≥ 0.9x on the training rows and the one-sample calls on a CPU "
                  "whose 256-bit FMAs have the peak of its 512-bit ones (AMD Zen 4).", "",
                  "| workload | thr | native | AVX2 | **AVX2 / native** | native of peak | AVX2 of peak | ≥ 0.9x |",
                  "|---|---|---|---|---|---|---|---|"]
        def pct(x):
            return "—" if x is None else f"{100 * x:.0f} %"
        for r in simd:
            verdict = ("—" if not simd_target_row(r["workload"]) or r["avx2_speed"] is None else
                       "met" if r["avx2_speed"] >= 0.9 else "MISSED")
            lines.append(f"| {r['workload']} | {r['threads']} | {fmt_time(r['native_seconds'])} "
                         f"| {fmt_time(r['avx2_seconds'])} | **{fmt_speed(r['avx2_speed'])}** "
                         f"| {pct(r['native_peak_fraction'])} | {pct(r['avx2_peak_fraction'])} | {verdict} |")
    avx2_speed = {(r["workload"], r["threads"]): r["avx2_speed"] for r in simd}
    for r in rows:
        r["avx2_speed"] = avx2_speed.get((r["workload"], r["threads"]))
    with open(os.path.join(outdir, "benchmarks.json"), "w") as f:
        json.dump(rows, f, indent=1)

    lines += ["", "## Targets", "",
              "Issue 15's ratios against today's frameworks, issue 14's PINN step ratios, issue 16's fractions of "
              "the FMA peak, all from this run. The last column of the ratio tables is what meeting the target "
              "would take: chainlet's time at the target ratio, as GFLOP/s and as a fraction of the FMA peak "
              "measured in this run (over 100 %: not reachable on this machine at that thread count, whatever the "
              "code).", ""]
    lines += ratio_targets(TARGETS)
    lines += ["", "The PINN Adam step (issue 14), 1 thread:", ""]
    lines += ratio_targets(TARGETS_PINN)
    lines += ["", "Fractions of the FMA peak (issue 16; the PINN step: issue 14) and the one-sample latency:", "",
              "| figure | target | measured | |", "|---|---|---|---|"]
    for prefix, t, target in TARGETS_PEAK:
        got = target_value(prefix, t, "peak_fraction")
        lines.append(f"| {prefix}, {t} thread(s) | ≥ {100 * target:.0f} % of peak | "
                     + ("not measured | missed |" if got is None else
                        f"{100 * got:.0f} % | {'met' if got >= target else 'MISSED'} |"))
    for prefix, t, target in TARGETS_LATENCY:
        got = target_value(prefix, t, "chainlet_seconds")
        lines.append(f"| {prefix}, {t} thread(s) | ≤ {fmt_time(target)} | "
                     + ("not measured | missed |" if got is None else
                        f"{fmt_time(got)} | {'met' if got <= target else 'MISSED'} |"))
    # chainlet's time of each row in both C++ processes: where they differ a lot, the process, not the
    # code, set the figure (see the note below the table).
    spread = []
    for r in rows:
        s = seconds[(r["workload"], r["threads"])]
        both = [s.get(k) for k in ("libtorch2_own_chainlet", "libtorch113_own_chainlet")]
        if all(both) and max(both) > 1.25 * min(both):
            spread.append(f"{r['workload']} ({r['threads']} thr): {fmt_time(both[0])} next to LibTorch 2.13, "
                          f"{fmt_time(both[1])} next to LibTorch 1.13")
    pinn_peak = [r for r in rows if r["workload"].startswith("PINN Poisson Adam step, float32") and r["threads"] == 1]
    pinn_missed = bool(pinn_peak) and pinn_peak[0]["peak_fraction"] < 0.60
    # LeNet5 inference's ONNX Runtime targets, from the rows (only a measured ratio below its target)
    inference_missed = False
    for prefix, t, target, over in TARGETS:
        if prefix.startswith("LeNet5 inference") and over == "onnxruntime":
            got = target_value(prefix, t, f"ratio_{over}")
            inference_missed |= got is not None and got < target
    lines += ["", "What limits the missed targets (the \"needed\" column gives the arithmetic). "
              + ("LeNet5 inference is compared with ONNX Runtime's fused, prepacked convolutions: 3x of it needs "
                 "about the machine's whole FMA peak. " if inference_missed else "")
              + "The fractions of the peak are held back where the per-layer profile below shows "
              "it: the tiny MLP's first layer (4 inputs, 32 tanh outputs: 4 multiply-adds per tanh) and the "
              "element-wise work between the matrix products"
              + ("; for the PINN, the activation jets (value and three derivatives of tanh per column), which "
                 "count no FLOPs" if pinn_missed else "") + ". "
              "chainlet's times of this run that differ by more than 1.25x between the two C++ processes (the "
              "process, not the code, moved them; before 8fc06bf the one-sample forward + pullback showed 4 µs "
              "instead of 0.3 µs in some processes, because the C++ timer sized its blocks on a first call that "
              "paid a one-time cost of 25 ms and more; the tables use the LibTorch 2.13 process's time): "
              + ("; ".join(spread) if spread else "none") + ".", "",
              "Before issue 15 the targets were held against Debian's LibTorch 1.13 (same-process ratios):", "",
              "| figure | target | measured | |", "|---|---|---|---|"]
    for prefix, t, target in TARGETS_113:
        got = target_value(prefix, t, "ratio_libtorch113_same_process")
        lines.append(f"| {prefix}, {t} thread(s) | ≥ {target:g}x LibTorch 1.13 | "
                     + ("not measured | missed |" if got is None else f"{got:.1f}x | {'met' if got >= target else 'MISSED'} |"))

    # First-step cost
    fws = ["chainlet"] + [k for k, _ in FRAMEWORKS]
    lines += ["", "## First-step cost", "",
              "What a program pays before its first result, measured once per process on fresh state: the first "
              "call including workspace / optimiser creation (chainlet, LibTorch, PyTorch eager), tracing and "
              "compilation (torch.compile, jax.jit), session creation (ONNX Runtime); in brackets the steady time "
              "of a later call. The process's first row also pays one-time library initialisation. Python's "
              "`import` is not included; it is listed below the table. LeNet5 training: one step of 2048 images.",
              ""]
    lines += ["| workload | thr | " + " | ".join(NAME[k] for k in fws) + " |", "|---|---|" + "---|" * len(fws)]
    idx = {(f["workload"], f["threads"], f["framework"]): f for f in first}
    for w in FIRST_STEP:
        if not any(f["workload"] == w for f in first):
            continue
        for t in threads:
            cells = []
            for k in fws:
                f = idx.get((w, t, k))
                cells.append("—" if f is None else f"{fmt_time(f['first_seconds'])} ({fmt_time(f['steady_seconds'])})")
            lines.append(f"| {w} | {t} | " + " | ".join(cells) + " |")
    imports = []
    for name, label in (("pytorch2", "torch 2.13"), ("jax", "jax"), ("onnxruntime", "onnxruntime"), ("pytorch113", "torch 1.13")):
        for t in threads:
            m = meta[name].get(t, {})
            if m.get("import_seconds") is not None:
                imports.append(f"{label} {m['import_seconds']:.2f} s ({t} thr)")
    lines += ["", "`import` times: " + ", ".join(imports) + "." if imports else ""]
    ex = [meta["onnxruntime"].get(t, {}).get("export_seconds") for t in threads]
    if any(ex):
        lines.append(f"Exporting both models to ONNX (torch.onnx.export, in a child process, interpreter start "
                     f"included) took {', '.join(f'{e:.1f} s' for e in ex if e)}; a deployment does it once, offline.")
    cc = [(f["workload"], f["threads"], f["first_seconds"] - f["steady_seconds"]) for f in first
          if f["framework"] == "pytorch_compile"]
    if cc:
        lines.append("torch.compile time (first call − steady call), all rows of the run: "
                     + ", ".join(f"{w} ({t} thr) {max(c, 0):.1f} s" for w, t, c in cc) + ".")

    lines += ["", "## Inference latency grid", "",
              "Latency per sample against batch size (1, 2, 4, …, 2048; a `--quick` run measures 1, 8, 64, 512, "
              "2048), inference only, every framework, 1 and 2 threads; torch.compile with its default "
              "dynamic-shape policy (the first batch size other than 1 recompiles with a dynamic batch), "
              "compilations outside the timing. Per-batch figures in `benchmarks-details.json`.", "",
              "![latency per sample vs batch size](latency_grid.png)", ""]
    for (m, t), fwd in sorted(grid.items()):
        batches = sorted({b for pts in fwd.values() for b in pts})
        lines.append(f"{m}, {t} thread(s), µs per sample:")
        lines.append("")
        lines.append("| batch | " + " | ".join(NAME[k] for k in fwd) + " |")
        lines.append("|---|" + "---|" * len(fwd))
        for b in batches:
            lines.append(f"| {b} | " + " | ".join(f"{fwd[k][b] / b * 1e6:.3g}" if b in fwd[k] else "—" for k in fwd) + " |")
        lines.append("")

    profile = os.path.join(results, "profile.md")
    if os.path.exists(profile):
        body = open(profile).read().strip().splitlines()
        # chainlet_profile's own headings are level 3, under this section's.
        lines += ["## Where chainlet's time goes: per-layer profile", "",
                  "`build/bench/chainlet_profile` (bench/profile.cpp), run by the same `bench/compare.sh` after the "
                  "frameworks, pinned like the rows: every layer's forward and pullback, the loss, the partial "
                  "gradients and the optimiser step of the benchmark workloads, timed inside one instrumented "
                  "step on 1 thread, with the library's own uninstrumented step on 1 and 2 threads below each "
                  "table to check the sum. % of the FMA peak measured by that process. What bounds each workload, "
                  "and how to measure it, is in [profile.md](profile.md).", ""]
        first = next((i for i, ln in enumerate(body) if ln.startswith("#")), len(body))
        preamble = [ln for ln in body[:first] if ln.strip()]
        lines += ["    " + ln for ln in preamble] + [""] + body[first:]  # its preamble as a code block
        lines.append("")
    lines += [
        "![chainlet's speed-up over each framework](benchmarks.png)",
        "",
        "## How it is measured, and what differs (fairness)",
        "",
        "* **One invocation, same machine, same data sizes.** `bench/compare.sh` runs, for 1 and then 2 threads, "
        "`chainlet_compare_torch2` (chainlet and LibTorch 2.13), `bench/pytorch/compare.py` (PyTorch 2.13), "
        "`bench/jax/compare.py`, `bench/onnx/compare.py` and, in the full run, the historical columns: "
        "`chainlet_compare` (chainlet and Debian's LibTorch 1.13) and `bench/pytorch/compare.py` under Debian's "
        "Python (PyTorch 1.13). Each is its own process.",
        "* **Thread pinning, identical for every framework.** Each process runs under `taskset -c 0` (1 thread) "
        "or `taskset -c 0,1` (2 threads) with `OMP_NUM_THREADS` and `MKL_NUM_THREADS` set to the count, plus the "
        "framework's own setting: chainlet's `threads` argument; `torch::set_num_threads` / `torch.set_num_threads`; "
        "JAX: `XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1` for 1 thread "
        "(`=true ... =2` for 2), set before jax is imported; ONNX Runtime: `intra_op_num_threads` = the count, "
        "`inter_op_num_threads` = 1, `ORT_SEQUENTIAL`. taskset bounds every runtime whatever its own pool size.",
        "* **Compilation caches**: torch.compile's (inductor) and JAX's persistent caches live in build/bench/; "
        "a full run empties both first (the 1-thread process compiles cold, the 2-thread one finds its work), "
        "`--quick` keeps them (warm). Compilation never enters the step times (see the first-step table).",
        "* **Data in memory for everyone**, created before timing (JAX: on the device, LeNet5 batches split "
        "before timing; PyTorch channels_last: converted before timing). **Warm-up excluded**: each function "
        "runs once or more untimed (which also sizes its blocks of calls to ~0.2 s, 0.05 s in `--quick`); "
        "the first call is reported apart (first-step table). **Medians** of 7 rounds (3 in `--quick`; grid "
        "5 / 3). **Alternating where frameworks share a process**: chainlet and LibTorch round by round in each "
        "C++ program; PyTorch eager, channels_last and torch.compile round by round in the PyTorch process.",
        "* **Memory pages, the same for everyone**: every process runs with `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, "
        "so that glibc advises its large allocations for transparent huge pages, whichever framework makes them "
        "(PyTorch's and XLA's CPU allocators, ONNX Runtime's arena, numpy and `std::vector` all allocate through "
        "malloc). Where the kernel's THP setting is `madvise` (listed above), the data sets would otherwise be read "
        "through 4 KiB pages, which on a 2-vCPU Xeon VM (docs/profile.md) cost chainlet's LeNet5 "
        "epoch 25 % and LibTorch 1.13's 40 %. chainlet's own buffers (`aligned_vector`, its workspaces) and "
        "data sets read by `read_idx` are advised for huge pages without it.",
        "* chainlet's column is the time measured next to LibTorch 2.13; every ratio divides by it. chainlet is "
        "also measured next to LibTorch 1.13; that same-process ratio is `ratio_libtorch113_same_process` in "
        "benchmarks.json (and the historical targets above).",
        "* **Same models, batches, optimisers**: tiny MLP 4→32→16→4 tanh, wide MLP 2→64→64→2 tanh, LeNet5 "
        "(PyTorch's NCHW; channels_last as a PyTorch setting; JAX in NHWC, the layout XLA's CPU convolutions "
        "use, with 2×2 max pooling as reshape + max, whose gradient is about 2x faster there than "
        "`reduce_window`'s). Adam lr 1e-3 (MLPs) and 3e-4 (LeNet5), default betas and eps everywhere (optax's "
        "`adam`, torch's `Adam` (foreach on the wheel; torch.compile compiles the model, the optimiser step "
        "stays eager), chainlet's `Adam`). LeNet5 trains without shuffling (contiguous batches of 2048); a "
        "`--quick` run uses 4,096 random images per epoch instead of 60,000 and 2,048 test images instead of 10,000.",
        "* **The layer kinds of issue 13 and the PINN of issue 14**: GRU = `nn.GRU(4, 32, batch_first=True)` "
        "over 50 steps, its last output into `Linear(32, 1)` (chainlet `GRU<32>` + `Dense<1>`, PyTorch's gate "
        "equations and order; JAX `lax.scan` of the same equations), batch 256, MSE, Adam(1e-3), and one "
        "sequence for inference. Conv1D net = Conv1d(4→16, k 5, padding 2), ReLU, MaxPool1d(2), Conv1d(16→32, "
        "k 5, padding 2), ReLU, MaxPool1d(2), global average pool, Linear(32, 4) on 256 sequences of 64 steps "
        "(chainlet channels-last (L, C), PyTorch (C, L), JAX NWC with the pool as reshape + max); its FLOPs "
        "count only taps on real inputs. PINN = MLP 2→32→32→32→1 tanh on the Poisson problem of "
        "examples/pinn, 1,024 interior points (u, ∇u, Δu) and 256 boundary points (u), loss mean (Δu + f)² + "
        "mean u², Adam(1e-3): chainlet's one-pass input derivatives (`derivatives/taylor.hpp`) and their "
        "hand-written pullback, (Lib)Torch's double backward (`autograd.grad(..., create_graph=True)` for ∇u, "
        "then once per coordinate for the second derivatives), JAX's jvp of the gradient per coordinate under "
        "`jit` (the float64 row inside `jax.enable_x64`). Its FLOPs are the matrix products of the pass and "
        "its pullback (about 55 MFLOP a step), the activation jets not counted; float64 rows are a fraction of "
        "half the fp32 peak. torch.compile does not run the PINN rows (AOTAutograd refuses double backward; "
        "the note above quotes the error).",
        "* **Initialisation and data values differ, shapes do not**: PyTorch/LibTorch/ONNX use PyTorch's "
        "default init (ONNX models are exported from PyTorch), JAX the same uniform(±1/√fan_in) drawn by numpy, "
        "chainlet its own `init_params`; inputs are random normal, LeNet5 labels `i mod 10`. None of these "
        "kernels' cost depends on the values.",
        "* **Known differences**: MSE is the mean over all elements in PyTorch and JAX, over samples in "
        "chainlet (a constant factor); the one-sample forward + pullback is `value_and_gradient` in chainlet, "
        "zero_grad + forward + loss + backward in (Lib)Torch, a jitted `jax.vjp` of the loss in JAX; JAX steps "
        "wait for their result (`block_until_ready`) every call, as a loop that reads the loss would; "
        "ONNX Runtime copies its output into a new numpy array each call. Python frameworks pay the "
        "interpreter's dispatch cost, which is part of what a Python user gets.",
        "* LibTorch 2.13 comes from the wheel (`torch/share/cmake/Torch`, C++11 ABI like Debian's g++ 12 "
        "default); it brings its own `libgomp.so.1`, which the program then loads for chainlet's OpenMP too "
        "(one OpenMP runtime per process). LibTorch 1.13 and 2.13 cannot share a process (same symbols), so "
        "each has its own program and its own build tree (`build/compare-torch2`).",
        "* The machine is shared: absolute times drift by ±30 % between runs, and other jobs' load (above) "
        "adds noise; ratios measured in one run are the figures to quote.",
    ]
    with open(os.path.join(outdir, "benchmarks.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # The README's table quotes full runs only: a --quick run (shorter epochs, fewer rounds) would put
    # its figures under the README's description of a full run.
    if quick:
        print("--quick: README.md's speed table left as it is (it quotes full runs)")
    else:
        readme_table(rows, os.path.join(outdir, "..", "README.md"))
    plots(rows, grid, threads, outdir, any_cpp["cpu"])


# Rows on which the AVX2 build should reach 0.9x the native build's speed on a Zen 4 (whose 256-bit FMAs
# have the peak of its 512-bit ones): the training rows and the one-sample calls.
def simd_target_row(workload):
    return any(k in workload for k in ("train", "step", "1 sample", "1 sequence"))


def simd_rows(results, threads):
    """chainlet's native build against its AVX2 build: per row, the fastest of each build's runs (they ran
    in turn, so both saw the same machine), and each build's fraction of the FMA peak its own process
    measured (the AVX2 build's with 256-bit FMAs)."""
    out = []
    for t in threads:
        runs = {b: [d for p in sorted(glob.glob(os.path.join(results, f"{b}-*-{t}.json"))) if (d := load(p))]
                for b in ("native", "avx2")}
        if not runs["native"] or not runs["avx2"]:
            continue
        for r in runs["native"][0]["rows"]:
            w = r["workload"]
            row = {"workload": w, "threads": t, "dtype": r.get("dtype", "float32"), "flops": r["flops"]}
            for b in ("native", "avx2"):
                times = [x["chainlet_seconds"] for d in runs[b] for x in d["rows"] if x["workload"] == w]
                peak = max(d["peak_gflops"][str(t)] for d in runs[b]) / (2 if row["dtype"] == "float64" else 1)
                row[f"{b}_seconds"] = min(times) if times else None
                row[f"{b}_simd"] = runs[b][0]["simd"]
                row[f"{b}_runs"] = len(times)
                row[f"{b}_peak_fraction"] = (r["flops"] / row[f"{b}_seconds"] / 1e9 / peak
                                             if times and r["flops"] > 0 else None)
            row["avx2_speed"] = (row["native_seconds"] / row["avx2_seconds"]
                                 if row["native_seconds"] and row["avx2_seconds"] else None)
            out.append(row)
    return out


def readme_table(rows, readme):
    """Rewrites the README's speed table (between its speed-table markers) with this run's 1-thread rows,
    the ratio against the best of today's frameworks first."""
    begin, end = "<!-- speed-table: written by bench/report.py -->", "<!-- /speed-table -->"
    if not os.path.exists(readme):
        return
    text = open(readme).read()
    if begin not in text or end not in text:
        print(f"{readme} has no speed-table markers: its table is not updated")
        return
    table = ["| workload (1 thread) | chainlet | **vs best of today's** (which) | vs LibTorch 2.13 | vs PyTorch 2.13 best "
             "| vs JAX | vs ONNX Runtime | vs LibTorch 1.13 | of FMA peak | AVX2 build / native |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["threads"] != 1:
            continue
        peak = "—" if r["peak_fraction"] is None else f"{100 * r['peak_fraction']:.0f} %"
        table.append(f"| {r['workload']} | {fmt_time(r['chainlet_seconds'])} | **{fmt_ratio(r['ratio_best'])}** "
                     f"({NAME.get(r['best_framework'], '—')}) | {fmt_ratio(r['ratio_libtorch2'])} "
                     f"| {fmt_ratio(r['ratio_pytorch_best'])} | {fmt_ratio(r['ratio_jax'])} "
                     f"| {fmt_ratio(r['ratio_onnxruntime'])} | {fmt_ratio(r['ratio_libtorch'])} | {peak} "
                     f"| {fmt_speed(r.get('avx2_speed'))} |")
    head, rest = text.split(begin, 1)
    with open(readme, "w") as f:
        f.write(head + begin + "\n" + "\n".join(table) + "\n" + end + rest.split(end, 1)[1])


def plots(rows, grid, threads, outdir, cpu):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found: no charts")
        return
    series = [("ratio_best", "vs best of today's"), ("ratio_libtorch2", "vs LibTorch 2.13"),
              ("ratio_pytorch_best", "vs PyTorch 2.13 best"), ("ratio_jax", "vs JAX"),
              ("ratio_onnxruntime", "vs ONNX Runtime"), ("ratio_libtorch", "vs LibTorch 1.13")]
    labels = [f"{r['workload']} ({r['threads']} thr)" for r in rows]
    h = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(11, 0.75 * len(rows) + 1.5))
    for i, (k, name) in enumerate(series):
        ys = [y - 0.4 + h * (i + 0.5) for y in range(len(rows))]
        ax.barh(ys, [r[k] or 0 for r in rows], height=h, label=name, color="black" if i == 0 else None)
    ax.set_yticks(list(range(len(rows))))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1, color="gray", linewidth=0.8)
    ax.axvline(3, color="red", linewidth=0.6, linestyle="--")
    ax.set_xlabel("chainlet speed-up (other time / chainlet time, log scale; dashed: 3x)")
    ax.set_title(f"chainlet vs today's frameworks — {cpu}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "benchmarks.png"), dpi=100)

    models = sorted({m for m, _ in grid}, key=lambda m: m != "tiny MLP")
    fig, axes = plt.subplots(len(models), len(threads), figsize=(6 * len(threads), 4.5 * len(models)), squeeze=False)
    # One colour per framework in every panel.
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = {k: (palette[i % len(palette)], ".", 1.2) for i, (k, _) in enumerate(FRAMEWORKS)}
    styles["chainlet"] = ("black", "o", 2.2)
    for i, m in enumerate(models):
        for j, t in enumerate(threads):
            ax = axes[i][j]
            for fw, pts in grid.get((m, t), {}).items():
                bs = sorted(pts)
                color, marker, lw = styles[fw]
                ax.plot(bs, [pts[b] / b for b in bs], marker=marker, color=color, linewidth=lw, label=NAME[fw])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("batch size")
            ax.set_ylabel("latency per sample (s)")
            ax.set_title(f"{m} inference, {t} thread(s)")
            ax.grid(True, which="both", linewidth=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "latency_grid.png"), dpi=90)


if __name__ == "__main__":
    main()
