#!/usr/bin/env python3
"""The PyTorch (Python) side of chainlet's benchmarks: the workloads of bench/compare.cpp with the same
models, batches, optimisers and thread count, data in memory, warm-up excluded, medians of rounds.

With PyTorch 2.x (the pinned wheel in build/compare-venv) it measures three settings, alternating round
by round in this process: eager (NCHW), eager with channels_last (LeNet5 rows only) and torch.compile
(inductor, default options: the optimiser step stays eager). The first call of every setting on a fresh
optimiser is recorded apart (for torch.compile it holds the compilation) and never enters the step
times. With Debian's PyTorch 1.13 (/usr/bin/python3, the historical column) it measures eager only.

    python bench/pytorch/compare.py [--quick] [--no-grid] --thread-count T --json FILE
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402

t_import = time.perf_counter()
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import_seconds = time.perf_counter() - t_import


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def lenet5():
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 120), nn.ReLU(), nn.Linear(120, 84),
                         nn.ReLU(), nn.Linear(84, 10))


def blas_library():
    """The BLAS this process really uses: Debian's torch links the generic libblas.so.3, which the
    alternatives system points at OpenBLAS (or at the slow reference BLAS when OpenBLAS is missing);
    the wheel links MKL and oneDNN into libtorch_cpu (torch.__config__ names their versions)."""
    if hasattr(torch, "compile"):
        info = torch.__config__.parallel_info().splitlines()
        return "; ".join(line.strip() for line in info if "Math Kernel" in line or "MKL-DNN" in line) or "unknown"
    torch.randn(64, 64) @ torch.randn(64, 64)
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line}
    return ", ".join(sorted(os.path.realpath(lib) for lib in libs)) or "none mapped"


class Settings:
    """The PyTorch settings measured in this process, by framework name."""

    def __init__(self):
        self.legacy = not hasattr(torch, "compile")
        self.eager = "pytorch113" if self.legacy else "pytorch_eager"

    def models(self, make, lenet=False):
        """{framework: (model, input layout)}: fresh models, one per setting. Each workload starts from an
        empty dynamo cache: all nn.Sequential instances share one compiled frame, so without the reset
        later workloads would check the guards of every earlier graph on each call, and past dynamo's
        recompile limit would silently run eager."""
        out = {self.eager: (make(), torch.contiguous_format)}
        if not self.legacy:
            torch._dynamo.reset()
            if lenet:
                out["pytorch_channels_last"] = (make().to(memory_format=torch.channels_last), torch.channels_last)
            out["pytorch_compile"] = (torch.compile(make()), torch.contiguous_format)
        return out


def main():
    ap = harness.parse_args(__doc__)
    ap.add_argument("--no-grid", action="store_true", help="skip the latency grid (the historical run)")
    a = ap.parse_args()
    quick, t = a.quick, a.thread_count
    (rounds, target), (grid_rounds, grid_target) = harness.settings(quick)
    torch.set_num_threads(t)
    torch.manual_seed(0)
    s = Settings()
    res = harness.Results(t, framework="pytorch", pytorch=torch.__version__, blas=blas_library(),
                          import_seconds=import_seconds,
                          compile_cache=os.environ.get("TORCHINDUCTOR_CACHE_DIR", "default"))
    print(f"pytorch {torch.__version__}, {t} thread(s), import {import_seconds:.2f} s, BLAS: {res.meta['blas']}")

    def measure(workload, models, make_step, first_name=None):
        """make_step(model, layout) -> step; records each setting's first call, then alternates."""
        steps = {}
        for fw, (model, layout) in models.items():
            box = {}
            first, steady = harness.first_and_steady(lambda: box.update(step=make_step(model, layout)),
                                                     lambda: box["step"]())
            res.first_call(first_name or workload, fw, first, steady)
            steps[fw] = box["step"]
        res.row(workload, harness.alternate(steps, rounds, target))

    def adam_step(x, y, loss, lr):
        def make(model, layout):
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            xx = x.contiguous(memory_format=layout)

            def step():
                opt.zero_grad()
                loss(model(xx), y).backward()
                opt.step()
            return step
        return make

    def no_grad_forward(x):
        def make(model, layout):
            xx = x.contiguous(memory_format=layout)

            def step():
                with torch.no_grad():
                    model(xx)
            return step
        return make

    # 1. tiny MLP, full-batch Adam step on 10,000 samples
    x, y = torch.randn(harness.TINY_N, 4), torch.randn(harness.TINY_N, 4)
    measure("tiny MLP train step, 10k samples", s.models(lambda: mlp(harness.TINY)), adam_step(x, y, F.mse_loss, 1e-3))

    # 2. tiny MLP, one sample: forward, and forward + pullback (zero_grad, loss, backward)
    x1, y1 = torch.randn(1, 4), torch.randn(1, 4)
    measure("tiny MLP forward, 1 sample", s.models(lambda: mlp(harness.TINY)), no_grad_forward(x1))

    def pullback(model, layout):
        def step():
            model.zero_grad()
            F.mse_loss(model(x1), y1).backward()
        return step
    measure("tiny MLP forward+pullback, 1 sample", s.models(lambda: mlp(harness.TINY)), pullback)

    # 3. wide MLP 2 -> 64 -> 64 -> 2, Adam step at batch 1, 32, 256
    for n in harness.WIDE_BATCHES:
        xw, yw = torch.randn(n, 2), torch.randn(n, 2)
        measure(f"wide MLP train step, batch {n}", s.models(lambda: mlp(harness.WIDE)), adam_step(xw, yw, F.mse_loss, 1e-3))

    # 4. LeNet5: a training epoch (batch 2048, Adam(3e-4), no shuffling) and inference on 10,000 images (quick: 2048).
    #    The first call recorded is the first step (one batch), not a whole epoch.
    n = harness.lenet_images(quick)
    xl, yl = torch.randn(n, 1, 28, 28), torch.arange(n) % 10
    xt = torch.randn(harness.lenet_test_images(quick), 1, 28, 28)
    models = s.models(lenet5, lenet=True)
    steps = {}
    for fw, (model, layout) in models.items():
        xs = xl.contiguous(memory_format=layout)
        batches = [(xs[b0:b0 + harness.LENET_BATCH], yl[b0:b0 + harness.LENET_BATCH])
                   for b0 in range(0, n, harness.LENET_BATCH)]
        box = {}

        def prepare(model=model, box=box):
            box["opt"] = torch.optim.Adam(model.parameters(), lr=3e-4)

        def one(xb, yb, model=model, box=box):
            box["opt"].zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            box["opt"].step()

        first, steady = harness.first_and_steady(prepare, lambda one=one, b=batches[0]: one(*b))
        res.first_call("LeNet5 train step, batch 2048", fw, first, steady)
        steps[fw] = lambda one=one, batches=batches: [one(xb, yb) for xb, yb in batches]
    res.row(harness.lenet_epoch_name(quick), harness.alternate(steps, rounds, target))
    measure(harness.lenet_inference_name(quick), models, no_grad_forward(xt))

    # 5. The inference latency grid: torch.compile with its default dynamic-shape policy (batch 1 is
    #    specialised, the first other batch size recompiles with a dynamic batch dimension).
    if not a.no_grid:
        for name, make, lenet in (("tiny MLP", lambda: mlp(harness.TINY), False), ("LeNet5", lenet5, True)):
            models = s.models(make, lenet)
            for b in harness.grid_batches(quick):
                xb = torch.randn(b, 4) if not lenet else torch.randn(b, 1, 28, 28)
                steps = {fw: no_grad_forward(xb)(m, layout) for fw, (m, layout) in models.items()}
                for f in steps.values():
                    f()  # the compile (or recompile) of a new batch size stays out of the timing
                res.grid_point(name, b, harness.alternate(steps, grid_rounds, grid_target))
    res.write(a.json)


if __name__ == "__main__":
    main()
