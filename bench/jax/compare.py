#!/usr/bin/env python3
"""The JAX side of chainlet's benchmarks: the workloads of bench/compare.cpp written with jax.numpy and
jax.lax, every step under jax.jit (optax Adam for training; one-sample pullback as a jitted jax.vjp),
data on the device before timing, each call waited for (block_until_ready), warm-up excluded, medians of
rounds. The first call of each jitted function (tracing and XLA compilation) is recorded apart.
The float64 PINN row alone runs with 64-bit types enabled (the scoped jax.enable_x64).

XLA's CPU thread count is fixed at start: this script sets XLA_FLAGS before importing jax
(1 thread: --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1; T threads:
--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads=T), and bench/compare.sh pins the
process to T CPUs with taskset, which bounds XLA's threads whatever it makes of the flags.

    python bench/jax/compare.py [--quick] [--only SUBSTRING] --thread-count T --json FILE
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402


def xla_flags(threads):
    multi = "false" if threads == 1 else "true"
    return f"--xla_cpu_multi_thread_eigen={multi} intra_op_parallelism_threads={threads}"


def main():
    a = harness.parse_args(__doc__).parse_args()
    quick, t = a.quick, a.thread_count
    flags = xla_flags(t)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    t_import = time.perf_counter()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from jax import lax
    import_seconds = time.perf_counter() - t_import
    cache = os.environ.get("CHAINLET_JAX_CACHE_DIR")
    if cache:  # the persistent compilation cache (bench/compare.sh: empty at a full run's start, kept by --quick)
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

    (rounds, target), (grid_rounds, grid_target) = harness.settings(quick)
    res = harness.Results(t, framework="jax", jax=jax.__version__, optax=optax.__version__,
                          xla_flags=os.environ["XLA_FLAGS"], import_seconds=import_seconds, compile_cache=cache,
                          devices=[str(d) for d in jax.devices()])
    print(f"jax {jax.__version__}, {t} thread(s), XLA_FLAGS={os.environ['XLA_FLAGS']}, import {import_seconds:.2f} s")
    rng = np.random.default_rng(0)

    def dense_params(sizes, dtype=jnp.float32):
        """PyTorch's default Linear init (uniform in +-1/sqrt(fan_in)), weights stored (in, out)."""
        ps = []
        for i, o in zip(sizes[:-1], sizes[1:]):
            b = 1 / np.sqrt(i)
            ps.append((jnp.asarray(rng.uniform(-b, b, (i, o)), dtype), jnp.asarray(rng.uniform(-b, b, o), dtype)))
        return ps

    def mlp(ps, x):
        for w, b in ps[:-1]:
            x = jnp.tanh(x @ w + b)
        w, b = ps[-1]
        return x @ w + b

    def mse(ps, x, y):  # mean over all elements, as PyTorch's mse_loss
        return jnp.mean((mlp(ps, x) - y) ** 2)

    # LeNet5 in NHWC (XLA's CPU convolutions work in NHWC; one input channel makes it the same bytes
    # as NCHW), weights HWIO; flattening order differs from PyTorch's, which does not change the cost.
    def lenet_params():
        def conv(k, i, o):
            b = 1 / np.sqrt(k * k * i)
            return (jnp.asarray(rng.uniform(-b, b, (k, k, i, o)), jnp.float32), jnp.asarray(rng.uniform(-b, b, o), jnp.float32))
        return [conv(5, 1, 6), conv(5, 6, 16)] + dense_params([256, 120, 84, 10])

    def lenet(ps, x):
        def conv_relu(x, w, b):
            y = lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
            return jax.nn.relu(y + b)

        def pool(x):  # 2x2 max pool as a reshape and max: its gradient is ~2x faster on XLA's CPU than
            n, h, w, c = x.shape  # reduce_window's select_and_scatter (76 vs 156 ms at batch 2048, 1 thread)
            return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))
        x = pool(conv_relu(x, *ps[0]))
        x = pool(conv_relu(x, *ps[1]))
        x = x.reshape(x.shape[0], -1)
        for w, b in ps[2:4]:
            x = jax.nn.relu(x @ w + b)
        w, b = ps[4]
        return x @ w + b

    def xent(ps, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(lenet(ps, x), y).mean()

    def gru_params():
        """nn.GRU's init (uniform in +-1/sqrt(hidden)): input and hidden weights stored (in, 3 hidden) with
        PyTorch's gate order r, z, n, both bias vectors; then the Linear head."""
        h = harness.GRU_HIDDEN
        b = 1 / np.sqrt(h)

        def uniform(*shape):
            return jnp.asarray(rng.uniform(-b, b, shape), jnp.float32)
        return (uniform(harness.GRU_FEATURES, 3 * h), uniform(h, 3 * h), uniform(3 * h), uniform(3 * h)), dense_params([h, 1])

    def gru(ps, x):
        """x (batch, time, features) -> the head on the last hidden state, with PyTorch's GRU:
        r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z = sigmoid(W_iz x + b_iz + W_hz h + b_hz),
        n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h, h_0 = 0. The input
        projections of all steps are one product before the scan over time."""
        (wi, wh, bi, bh), head = ps
        h2 = 2 * harness.GRU_HIDDEN
        gi = jnp.swapaxes(x @ wi + bi, 0, 1)  # (time, batch, 3 hidden)

        def cell(h, g):
            gh = h @ wh + bh
            r, z = jnp.split(jax.nn.sigmoid(g[:, :h2] + gh[:, :h2]), 2, axis=1)
            n = jnp.tanh(g[:, h2:] + r * gh[:, h2:])
            return (1 - z) * n + z * h, None
        h, _ = lax.scan(cell, jnp.zeros((x.shape[0], harness.GRU_HIDDEN), x.dtype), gi)
        return mlp(head, h)

    def gru_mse(ps, x, y):
        return jnp.mean((gru(ps, x) - y) ** 2)

    # The Conv1D net in NWC (steps, channels), weights WIO (XLA's CPU convolutions work channels-last;
    # PyTorch's input is (channels, steps)).
    def conv1d_params():
        def conv(k, i, o):
            b = 1 / np.sqrt(k * i)
            return (jnp.asarray(rng.uniform(-b, b, (k, i, o)), jnp.float32), jnp.asarray(rng.uniform(-b, b, o), jnp.float32))
        return [conv(5, harness.CONV1D_CHANNELS, 16), conv(5, 16, 32)] + dense_params([32, harness.CONV1D_OUTPUTS])

    def conv1d_net(ps, x):
        def conv_relu(x, w, b):  # kernel 5, stride 1, 2 zeros padded at each end: the length is kept
            y = lax.conv_general_dilated(x, w, (1,), [(2, 2)], dimension_numbers=("NWC", "WIO", "NWC"))
            return jax.nn.relu(y + b)

        def pool(x):  # max over windows of 2 steps, stride 2, as a reshape and max (as LeNet5's pool:
            n, steps, c = x.shape  # its gradient is faster on XLA's CPU than reduce_window's)
            return x.reshape(n, steps // 2, 2, c).max(axis=2)
        x = pool(conv_relu(x, *ps[0]))
        x = pool(conv_relu(x, *ps[1]))
        return mlp(ps[2:], x.mean(axis=1))

    def conv1d_mse(ps, x, y):
        return jnp.mean((conv1d_net(ps, x) - y) ** 2)

    def pinn_data(dtype):
        """((interior points, boundary points), f at the interior points); boundary point i lies on side
        i % 4 (y = 0, x = 0, x = 1, y = 1)."""
        xi = rng.uniform(size=(harness.PINN_INTERIOR, 2))
        r = rng.uniform(size=harness.PINN_BOUNDARY)
        side = np.arange(harness.PINN_BOUNDARY) % 4
        xb = np.stack([r, r], 1)
        xb[side == 0, 1] = 0
        xb[side == 1, 0] = 0
        xb[side == 2, 0] = 1
        xb[side == 3, 1] = 1
        f = 2 * np.pi ** 2 * np.sin(np.pi * xi[:, 0]) * np.sin(np.pi * xi[:, 1])
        return (jnp.asarray(xi, dtype), jnp.asarray(xb, dtype)), jnp.asarray(f, dtype)

    def pinn_loss(ps, points, f):
        """mean (Lap u + f)^2 over the interior + mean u^2 over the boundary, under vmap over the points.
        Lap u at one point = sum_i d/dx_i (grad u)_i: forward over reverse, one jvp of the gradient per
        input direction e_i (in float32 6x faster on XLA's CPU than the trace of jax.hessian, whose
        nested batching gives 16.8 against 2.8 ms per step, 1 thread; float64 9.2 against 6.3 ms)."""
        xi, xb = points

        def lap(x):
            grad_u = jax.grad(lambda x: mlp(ps, x)[0])
            e = jnp.eye(2, dtype=x.dtype)
            return sum(jax.jvp(grad_u, (x,), (e[i],))[1][i] for i in range(2))
        return jnp.mean((jax.vmap(lap)(xi) + f) ** 2) + jnp.mean(mlp(ps, xb) ** 2)

    def adam_step(loss, lr):
        opt = optax.adam(lr)

        @jax.jit
        def step(ps, state, x, y):
            g = jax.grad(loss)(ps, x, y)
            upd, state = opt.update(g, state, ps)
            return optax.apply_updates(ps, upd), state
        return opt, step

    def trainer(params, loss, lr, batches):
        """A training loop's state; first() creates the optimiser state and runs the first step."""
        st = {}

        def prepare():
            opt, st["step"] = adam_step(loss, lr)
            st["ps"], st["state"] = params, opt.init(params)

        def one(x, y):
            st["ps"], st["state"] = st["step"](st["ps"], st["state"], x, y)
            jax.block_until_ready(st["ps"])

        def epoch():
            for x, y in batches:
                one(x, y)
        return prepare, lambda: one(*batches[0]), epoch

    def measure_train(workload, params, loss, lr, batches, first_name=None):
        prepare, first_step, epoch = trainer(params, loss, lr, batches)
        first, steady = harness.first_and_steady(prepare, first_step)
        res.first_call(first_name or workload, "jax", first, steady)
        res.row(workload, harness.alternate({"jax": epoch}, rounds, target))

    def measure_call(workload, f, args, timed_rounds=rounds, timed_target=target, record_first=True):
        jf = jax.jit(f)

        def call():
            jax.block_until_ready(jf(*args))
        first, steady = harness.first_and_steady(lambda: None, call)
        if record_first:
            res.first_call(workload, "jax", first, steady)
        return harness.alternate({"jax": call}, timed_rounds, timed_target)

    def normal(*shape):
        return jnp.asarray(rng.standard_normal(shape), jnp.float32)

    # 1. tiny MLP, full-batch Adam step on 10,000 samples
    name = "tiny MLP train step, 10k samples"
    if harness.wanted(a, name):
        x, y = normal(harness.TINY_N, 4), normal(harness.TINY_N, 4)
        measure_train(name, dense_params(harness.TINY), mse, 1e-3, [(x, y)])

    # 2. tiny MLP, one sample: jitted forward; jitted jax.vjp of the loss (value and parameter gradient)
    ps = dense_params(harness.TINY)
    x1, y1 = normal(1, 4), normal(1, 4)
    name = "tiny MLP forward, 1 sample"
    if harness.wanted(a, name):
        res.row(name, measure_call(name, mlp, (ps, x1)))

    def value_and_pullback(ps, x, y):
        value, back = jax.vjp(lambda p: mse(p, x, y), ps)
        return value, back(jnp.ones_like(value))[0]
    name = "tiny MLP forward+pullback, 1 sample"
    if harness.wanted(a, name):
        res.row(name, measure_call(name, value_and_pullback, (ps, x1, y1)))

    # 3. wide MLP 2 -> 64 -> 64 -> 2, Adam step at batch 1, 32, 256
    for n in harness.WIDE_BATCHES:
        name = f"wide MLP train step, batch {n}"
        if harness.wanted(a, name):
            measure_train(name, dense_params(harness.WIDE), mse, 1e-3, [(normal(n, 2), normal(n, 2))])

    # 4. LeNet5: a training epoch (batch 2048, Adam(3e-4), no shuffling; batches split before timing)
    #    and inference on 10,000 images (quick: 2048)
    lp = lenet_params()
    name = harness.lenet_epoch_name(quick)
    if harness.wanted(a, name):
        n = harness.lenet_images(quick)
        xl, yl = normal(n, 28, 28, 1), jnp.asarray(np.arange(n) % 10, jnp.int32)
        batches = [(xl[b0:b0 + harness.LENET_BATCH], yl[b0:b0 + harness.LENET_BATCH]) for b0 in range(0, n, harness.LENET_BATCH)]
        measure_train(name, lp, xent, 3e-4, batches, first_name="LeNet5 train step, batch 2048")
    name = harness.lenet_inference_name(quick)
    if harness.wanted(a, name):
        res.row(name, measure_call(name, lenet, (lp, normal(harness.lenet_test_images(quick), 28, 28, 1))))

    # 5. GRU: Adam step on 256 sequences of 50 steps, and inference on one sequence
    if harness.wanted(a, harness.GRU_TRAIN):
        xg, yg = normal(harness.GRU_BATCH, harness.GRU_STEPS, harness.GRU_FEATURES), normal(harness.GRU_BATCH, 1)
        measure_train(harness.GRU_TRAIN, gru_params(), gru_mse, 1e-3, [(xg, yg)])
    if harness.wanted(a, harness.GRU_INFER):
        res.row(harness.GRU_INFER, measure_call(harness.GRU_INFER, gru,
                                                (gru_params(), normal(1, harness.GRU_STEPS, harness.GRU_FEATURES))))

    # 6. Conv1D net: Adam step on 256 sequences, and inference on one sequence
    if harness.wanted(a, harness.CONV1D_TRAIN):
        xc = normal(harness.CONV1D_BATCH, harness.CONV1D_LENGTH, harness.CONV1D_CHANNELS)
        yc = normal(harness.CONV1D_BATCH, harness.CONV1D_OUTPUTS)
        measure_train(harness.CONV1D_TRAIN, conv1d_params(), conv1d_mse, 1e-3, [(xc, yc)])
    if harness.wanted(a, harness.CONV1D_INFER):
        res.row(harness.CONV1D_INFER, measure_call(harness.CONV1D_INFER, conv1d_net,
                                                   (conv1d_params(), normal(1, harness.CONV1D_LENGTH, harness.CONV1D_CHANNELS))))

    # 7. PINN (Poisson): Adam step on the residual loss, the whole step jitted. float64 needs jax_enable_x64,
    #    turned on by the jax.enable_x64 context around that row only: every other workload keeps JAX's
    #    32-bit defaults (its params, data and traces are made and run outside the context).
    for dtype in harness.PINN_DTYPES:
        name = harness.pinn_name(dtype)
        if harness.wanted(a, name):
            with jax.enable_x64(dtype == "float64"):
                points, f = pinn_data(getattr(jnp, dtype))
                measure_train(name, dense_params(harness.PINN_SIZES, getattr(jnp, dtype)), pinn_loss, 1e-3, [(points, f)])

    # 8. The inference latency grid (one compilation per batch size, outside the timing)
    if harness.wanted(a, harness.GRID):
        for name, f, p, shape in (("tiny MLP", mlp, dense_params(harness.TINY), (4,)), ("LeNet5", lenet, lp, (28, 28, 1))):
            for b in harness.grid_batches(quick):
                res.grid_point(name, b, measure_call(f"{name} grid", f, (p, normal(b, *shape)), grid_rounds, grid_target,
                                                     record_first=False))
    res.write(a.json)


if __name__ == "__main__":
    main()
