#!/usr/bin/env python3
"""The ONNX Runtime side of chainlet's benchmarks: the inference workloads of bench/compare.cpp (tiny MLP
forward on one sample, LeNet5 on 10,000 images (quick: 2048), the GRU and the Conv1D net on one sequence,
and the latency grid) on models exported from PyTorch (torch.onnx.export, a dynamic batch dimension; the
GRU becomes one ONNX GRU node). Sessions: CPU execution provider, intra_op_num_threads
= the thread count, inter_op_num_threads = 1, ORT_SEQUENTIAL, all graph optimisations; data in memory,
warm-up excluded, medians of rounds. The first call (session creation and first run) is recorded
apart; the export is a one-time, offline step, done in a child process (so torch's thread pool never
shares this process with ORT's) and reported as such.

    python bench/onnx/compare.py [--quick] [--only SUBSTRING] --thread-count T --json FILE [--models DIR]
    python bench/onnx/compare.py --export DIR      (the child: writes tiny_mlp, lenet5, gru and conv1d .onnx)
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402


def export(outdir):
    """Exports the models of bench/pytorch/compare.py (PyTorch's default init)."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytorch"))
    import compare as pt  # bench/pytorch/compare.py: the same model definitions
    torch.manual_seed(0)
    os.makedirs(outdir, exist_ok=True)
    for name, model, x in (("tiny_mlp", pt.mlp(harness.TINY), torch.randn(1, 4)),
                           ("lenet5", pt.lenet5(), torch.randn(1, 1, 28, 28)),
                           ("gru", pt.GruNet(), torch.randn(1, harness.GRU_STEPS, harness.GRU_FEATURES)),
                           ("conv1d", pt.conv1d_net(), torch.randn(1, harness.CONV1D_CHANNELS, harness.CONV1D_LENGTH))):
        t0 = time.perf_counter()
        torch.onnx.export(model.eval(), (x,), os.path.join(outdir, f"{name}.onnx"), input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, dynamo=False)
        print(f"exported {name}.onnx with torch {torch.__version__} in {time.perf_counter() - t0:.2f} s")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--export":
        export(sys.argv[2])
        return
    ap = harness.parse_args(__doc__)
    ap.add_argument("--models", default=os.path.join("build", "bench", "onnx-models"))
    a = ap.parse_args()
    quick, t = a.quick, a.thread_count
    paths = {m: os.path.join(a.models, f"{m}.onnx") for m in ("tiny_mlp", "lenet5", "gru", "conv1d")}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, os.path.abspath(__file__), "--export", a.models], check=True)
    export_seconds = time.perf_counter() - t0

    t_import = time.perf_counter()
    import numpy as np
    import onnxruntime as ort
    import_seconds = time.perf_counter() - t_import
    (rounds, target), (grid_rounds, grid_target) = harness.settings(quick)
    res = harness.Results(t, framework="onnxruntime", onnxruntime=ort.__version__, import_seconds=import_seconds,
                          export_seconds=export_seconds, providers=ort.get_available_providers())
    print(f"onnxruntime {ort.__version__}, {t} thread(s), import {import_seconds:.2f} s")
    rng = np.random.default_rng(0)

    def session(path):
        so = ort.SessionOptions()
        so.intra_op_num_threads = t
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def measure(workload, model, x, timed=(rounds, target), record_first=True):
        box = {}

        def prepare():
            box["s"] = session(paths[model])

        def call():
            box["s"].run(None, {"x": x})
        first, steady = harness.first_and_steady(prepare, call)
        if record_first:
            res.first_call(workload, "onnxruntime", first, steady)
        return harness.alternate({"onnxruntime": call}, *timed)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    for name, model, shape in (("tiny MLP forward, 1 sample", "tiny_mlp", (1, 4)),
                               (harness.lenet_inference_name(quick), "lenet5",
                                (harness.lenet_test_images(quick), 1, 28, 28)),
                               (harness.GRU_INFER, "gru", (1, harness.GRU_STEPS, harness.GRU_FEATURES)),
                               (harness.CONV1D_INFER, "conv1d", (1, harness.CONV1D_CHANNELS, harness.CONV1D_LENGTH))):
        if harness.wanted(a, name):
            res.row(name, measure(name, model, normal(*shape)))
    if harness.wanted(a, harness.GRID):
        for name, model, shape in (("tiny MLP", "tiny_mlp", (4,)), ("LeNet5", "lenet5", (1, 28, 28))):
            for b in harness.grid_batches(quick):
                res.grid_point(name, b, measure(name, model, normal(b, *shape), (grid_rounds, grid_target), False))
    res.write(a.json)


if __name__ == "__main__":
    main()
