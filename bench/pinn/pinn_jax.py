#!/usr/bin/env python3
"""The PINN Adam step of bench/pinn_bench.cpp in JAX: the Laplacian as the trace of jax.hessian of the
scalar network under vmap, loss and grad, optax.adam(1e-3), the whole step jitted.

  python pinn_jax.py --dtype float32|float64 [--steps S] [--repeats R]
Threads: XLA's CPU client uses the cores it may run on; run under `taskset -c 0` for one thread.
Prints one JSON line {system, dtype, threads, ms_per_step, cpu_ms_per_step (process CPU time)} (threads: the CPUs of the affinity mask).
"""
import argparse
import json
import math
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    import jax

    if a.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import optax

    dt = jnp.float32 if a.dtype == "float32" else jnp.float64
    key = jax.random.PRNGKey(1)
    sizes = [2, 32, 32, 32, 1]
    params = []
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        key, k1 = jax.random.split(key)
        lim = math.sqrt(6 / (m + n))
        params.append((jax.random.uniform(k1, (m, n), dt, -lim, lim), jnp.zeros(n, dt)))
    key, k1, k2 = jax.random.split(key, 3)
    xi = jax.random.uniform(k1, (1024, 2), dt)
    r = jax.random.uniform(k2, (256,), dt)
    side = jnp.arange(256) % 4
    xb = jnp.stack([jnp.where(side == 1, 0.0, jnp.where(side == 2, 1.0, r)),
                    jnp.where(side == 0, 0.0, jnp.where(side == 3, 1.0, r))], 1).astype(dt)
    f = 2 * math.pi ** 2 * jnp.sin(math.pi * xi[:, 0]) * jnp.sin(math.pi * xi[:, 1])

    def u(p, x):  # one point -> scalar
        h = x
        for w, b in p[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = p[-1]
        return (h @ w + b)[0]

    def lap(p, x):
        return jnp.trace(jax.hessian(u, argnums=1)(p, x))

    def loss(p):
        res = jax.vmap(lambda x: lap(p, x))(xi) + f
        ub = jax.vmap(lambda x: u(p, x))(xb)
        return jnp.mean(res ** 2) + jnp.mean(ub ** 2)

    opt = optax.adam(1e-3)
    state = opt.init(params)

    @jax.jit
    def step(p, s):
        g = jax.grad(loss)(p)
        upd, s = opt.update(g, s, p)
        return optax.apply_updates(p, upd), s

    for _ in range(10):
        params, state = step(params, state)
    jax.block_until_ready(params)
    best = cpu_best = math.inf
    for _ in range(a.repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            params, state = step(params, state)
        jax.block_until_ready(params)
        best = min(best, (time.perf_counter() - t0) / a.steps)
        cpu_best = min(cpu_best, (time.process_time() - c0) / a.steps)
    print(json.dumps({"system": f"jax {jax.__version__} jit", "dtype": a.dtype,
                      "threads": len(os.sched_getaffinity(0)), "ms_per_step": round(1e3 * best, 4),
                      "cpu_ms_per_step": round(1e3 * cpu_best, 4)}))


if __name__ == "__main__":
    main()
