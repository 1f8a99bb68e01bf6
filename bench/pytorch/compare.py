#!/usr/bin/env python3
"""The PyTorch (Python) side of chainlet's benchmarks: the workloads of bench/compare.cpp with the same
models, batches, optimisers and thread count, data in memory, warm-up excluded, medians of rounds.

With PyTorch 2.x (the pinned wheel in build/compare-venv) it measures three settings, alternating round
by round in this process: eager (NCHW), eager with channels_last (LeNet5 rows only) and torch.compile
(inductor, default options: the optimiser step stays eager). The first call of every setting on a fresh
optimiser is recorded apart (for torch.compile it holds the compilation) and never enters the step
times. With Debian's PyTorch 1.13 (/usr/bin/python3, the historical column) it measures eager only.
Two exceptions for torch.compile, stated in the JSON's "notes": the GRU rows set dynamo's allow_rnn
(without it nothing is compiled), and the PINN rows have no compile cell while the Laplacian's double
backward cannot run through compiled code (tried at the start of the PINN rows).

    python bench/pytorch/compare.py [--quick] [--no-grid] [--only SUBSTRING] --thread-count T --json FILE
"""
import math
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


class GruNet(nn.Module):
    """nn.GRU over (batch, time, features), its last hidden state into a Linear head."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(harness.GRU_FEATURES, harness.GRU_HIDDEN, batch_first=True)
        self.head = nn.Linear(harness.GRU_HIDDEN, 1)

    def forward(self, x):
        return self.head(self.gru(x)[0][:, -1])


def conv1d_net():
    return nn.Sequential(nn.Conv1d(harness.CONV1D_CHANNELS, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
                         nn.Conv1d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2), nn.AdaptiveAvgPool1d(1),
                         nn.Flatten(), nn.Linear(32, harness.CONV1D_OUTPUTS))


def pinn_points(dtype):
    """Interior points, f at them, and boundary points (point i on side i % 4: y = 0, x = 0, x = 1, y = 1)."""
    xi = torch.rand(harness.PINN_INTERIOR, 2, dtype=dtype)
    f = 2 * math.pi ** 2 * torch.sin(math.pi * xi[:, 0]) * torch.sin(math.pi * xi[:, 1])
    r = torch.rand(harness.PINN_BOUNDARY, dtype=dtype)
    side = torch.arange(harness.PINN_BOUNDARY) % 4
    xb = torch.stack([r, r], 1)
    xb[side == 0, 1] = 0
    xb[side == 1, 0] = 0
    xb[side == 2, 0] = 1
    xb[side == 3, 1] = 1
    return xi, f, xb


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

    def models(self, make, lenet=False, compiled=True):
        """{framework: (model, input layout)}: fresh models, one per setting. Each workload starts from an
        empty dynamo cache: all nn.Sequential instances share one compiled frame, so without the reset
        later workloads would check the guards of every earlier graph on each call, and past dynamo's
        recompile limit would silently run eager."""
        out = {self.eager: (make(), torch.contiguous_format)}
        if not self.legacy:
            torch._dynamo.reset()
            if lenet:
                out["pytorch_channels_last"] = (make().to(memory_format=torch.channels_last), torch.channels_last)
            if compiled:
                out["pytorch_compile"] = (torch.compile(make()), torch.contiguous_format)
        return out


def laplacian(net, x):
    """Lap u at the points x (n, 2), u = net(x): the gradient, then the gradient of each of its two
    components, every torch.autograd.grad with create_graph so that the loss can be differentiated again."""
    x = x.clone().requires_grad_(True)
    (du,) = torch.autograd.grad(net(x).sum(), x, create_graph=True)
    return sum(torch.autograd.grad(du[:, i].sum(), x, create_graph=True)[0][:, i] for i in range(2))


def compiled_double_backward_error():
    """None when the PINN's Laplacian runs through a torch.compile'd network, else the error it raises."""
    torch._dynamo.reset()
    try:
        laplacian(torch.compile(mlp(harness.PINN_SIZES)), torch.rand(8, 2))
        return None
    except RuntimeError as e:
        return str(e)


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
                          compile_cache=os.environ.get("TORCHINDUCTOR_CACHE_DIR", "default"), notes=[])
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
    name = "tiny MLP train step, 10k samples"
    if harness.wanted(a, name):
        x, y = torch.randn(harness.TINY_N, 4), torch.randn(harness.TINY_N, 4)
        measure(name, s.models(lambda: mlp(harness.TINY)), adam_step(x, y, F.mse_loss, 1e-3))

    # 2. tiny MLP, one sample: forward, and forward + pullback (zero_grad, loss, backward)
    x1, y1 = torch.randn(1, 4), torch.randn(1, 4)
    name = "tiny MLP forward, 1 sample"
    if harness.wanted(a, name):
        measure(name, s.models(lambda: mlp(harness.TINY)), no_grad_forward(x1))

    def pullback(model, layout):
        def step():
            model.zero_grad()
            F.mse_loss(model(x1), y1).backward()
        return step
    name = "tiny MLP forward+pullback, 1 sample"
    if harness.wanted(a, name):
        measure(name, s.models(lambda: mlp(harness.TINY)), pullback)

    # 3. wide MLP 2 -> 64 -> 64 -> 2, Adam step at batch 1, 32, 256
    for n in harness.WIDE_BATCHES:
        name = f"wide MLP train step, batch {n}"
        if harness.wanted(a, name):
            xw, yw = torch.randn(n, 2), torch.randn(n, 2)
            measure(name, s.models(lambda: mlp(harness.WIDE)), adam_step(xw, yw, F.mse_loss, 1e-3))

    # 4. LeNet5: a training epoch (batch 2048, Adam(3e-4), no shuffling) and inference on 10,000 images (quick: 2048).
    #    The first call recorded is the first step (one batch), not a whole epoch.
    epoch_name, infer_name = harness.lenet_epoch_name(quick), harness.lenet_inference_name(quick)
    if harness.wanted(a, epoch_name) or harness.wanted(a, infer_name):
        models = s.models(lenet5, lenet=True)
    if harness.wanted(a, epoch_name):
        n = harness.lenet_images(quick)
        xl, yl = torch.randn(n, 1, 28, 28), torch.arange(n) % 10
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
        res.row(epoch_name, harness.alternate(steps, rounds, target))
    if harness.wanted(a, infer_name):
        measure(infer_name, models, no_grad_forward(torch.randn(harness.lenet_test_images(quick), 1, 28, 28)))

    # 5. GRU: Adam step on 256 sequences of 50 steps, and inference on one sequence. torch.compile needs
    #    torch._dynamo.config.allow_rnn (default False: dynamo then skips the whole forward, which runs
    #    eagerly); with it, inductor compiles the 50 unrolled steps (minutes of compilation on a cold cache).
    #    A --quick run leaves torch.compile out of the GRU rows: its cold compilation (~160 s for the
    #    train step, ~70 s for inference on this machine) alone is more than --quick's budget.
    gru_compiled = not quick
    if not s.legacy and (harness.wanted(a, harness.GRU_TRAIN) or harness.wanted(a, harness.GRU_INFER)):
        if gru_compiled:
            torch._dynamo.config.allow_rnn = True
            res.meta["notes"].append("torch.compile of the GRU rows sets torch._dynamo.config.allow_rnn = True: "
                                     "by default dynamo captures no graph for a forward holding nn.GRU and runs "
                                     "it eagerly")
        else:
            res.meta["notes"].append("--quick: no torch.compile cell for the GRU rows (its cold compilation, "
                                     "minutes, is more than a quick run's budget)")
    if harness.wanted(a, harness.GRU_TRAIN):
        xg = torch.randn(harness.GRU_BATCH, harness.GRU_STEPS, harness.GRU_FEATURES)
        yg = torch.randn(harness.GRU_BATCH, 1)
        measure(harness.GRU_TRAIN, s.models(GruNet, compiled=gru_compiled), adam_step(xg, yg, F.mse_loss, 1e-3))
    if harness.wanted(a, harness.GRU_INFER):
        measure(harness.GRU_INFER, s.models(GruNet, compiled=gru_compiled),
                no_grad_forward(torch.randn(1, harness.GRU_STEPS, harness.GRU_FEATURES)))

    # 6. Conv1D net: Adam step on 256 sequences (channels, steps), and inference on one sequence
    if harness.wanted(a, harness.CONV1D_TRAIN):
        xc = torch.randn(harness.CONV1D_BATCH, harness.CONV1D_CHANNELS, harness.CONV1D_LENGTH)
        yc = torch.randn(harness.CONV1D_BATCH, harness.CONV1D_OUTPUTS)
        measure(harness.CONV1D_TRAIN, s.models(conv1d_net), adam_step(xc, yc, F.mse_loss, 1e-3))
    if harness.wanted(a, harness.CONV1D_INFER):
        measure(harness.CONV1D_INFER, s.models(conv1d_net),
                no_grad_forward(torch.randn(1, harness.CONV1D_CHANNELS, harness.CONV1D_LENGTH)))

    # 7. PINN (Poisson): Adam step on the residual loss, float32 and float64. torch.compile joins only if
    #    the Laplacian's double backward runs through compiled code (AOTAutograd refuses it so far).
    pinn_dtypes = [d for d in harness.PINN_DTYPES if harness.wanted(a, harness.pinn_name(d))]
    compiled = False
    if pinn_dtypes and not s.legacy:
        error = compiled_double_backward_error()
        compiled = error is None
        if error:
            note = f"no torch.compile cell for the PINN rows: the Laplacian's double backward raises: {error}"
            print(note)
            res.meta["notes"].append(note)

    def pinn_step(xi, f, xb):
        def make(net, layout):
            opt = torch.optim.Adam(net.parameters(), lr=1e-3)

            def step():
                loss = ((laplacian(net, xi) + f) ** 2).mean() + (net(xb) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            return step
        return make

    for dtype in pinn_dtypes:
        dt = getattr(torch, dtype)
        measure(harness.pinn_name(dtype), s.models(lambda: mlp(harness.PINN_SIZES).to(dt), compiled=compiled),
                pinn_step(*pinn_points(dt)))

    # 8. The inference latency grid: torch.compile with its default dynamic-shape policy (batch 1 is
    #    specialised, the first other batch size recompiles with a dynamic batch dimension).
    if not a.no_grid and harness.wanted(a, harness.GRID):
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
