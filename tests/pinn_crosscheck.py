#!/usr/bin/env python3
"""PyTorch autograd (double backward) cross-check of chainlet's input-derivative pass (ctest pinn_crosscheck).

  pinn_crosscheck.py <path to the pinn_crosscheck program> <work dir>

Per case (tests/pinn_crosscheck.cpp) the network (Dense layers, convolutions, poolings, RMSNorm, LayerNorm, Softmax,
standalone activations, Slice, Residual, Parallel; python/chainlet_torch.py's modules) is rebuilt in float64 PyTorch; u, du/dx_i (autograd.grad
with create_graph=True), d2u/dx_i^2 (grad of the first derivatives) and the Laplacian, then the residual
loss mean_s (a u + sum_i b_i u_i + sum_i c_i u_ii + c_lap Lap u - sin x_0)^2 on output 0 and its parameter
gradient by backward through that graph, must agree with chainlet's to 1e-9 relative
(max |a - b| / max |b| per quantity). Exits 77 (ctest's SKIP_RETURN_CODE) without torch.
"""
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

try:
    import torch
    from torch import nn
    from chainlet_torch import FourierFeatures, Parallel, Residual, Slice
except ImportError as e:
    print(f"SKIP: the PINN cross-check needs torch in {sys.executable}: {e}")
    sys.exit(77)

TOLERANCE = 1e-9
ACT = {
    "identity": lambda z: z,
    "relu": torch.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "softplus": torch.nn.functional.softplus,
    "gelu": lambda z: torch.nn.functional.gelu(z, approximate="tanh"),
    "gelu_erf": torch.nn.functional.gelu,
    "elu": torch.nn.functional.elu,
    "silu": torch.nn.functional.silu,
    "leaky_relu(1/100)": lambda z: torch.nn.functional.leaky_relu(z, 0.01),
    "leaky_relu(1/5)": lambda z: torch.nn.functional.leaky_relu(z, 0.2),
    "sin(1/1)": torch.sin,
    "sin(30/1)": lambda z: torch.sin(30 * z),
}


def rel(a, b):
    a = torch.as_tensor(a, dtype=torch.float64).flatten()
    b = torch.as_tensor(b, dtype=torch.float64).flatten()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


class Func(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


def dense(w, b, act):
    return Func(lambda h: act(h @ w + b if b is not None else h @ w))


def build(layers, flat, off, params):
    """nn.Sequential of the layer tree; consumes chainlet's flat parameters in order, appends the tensors
    (W as (in, out), chainlet's W[i * out + o], and b) to params."""
    mods = []
    for layer in layers:
        kind = layer["type"]
        if kind == "dense":
            i, o = layer["in"], layer["out"]
            w = torch.tensor(flat[off:off + i * o], dtype=torch.float64).reshape(i, o).requires_grad_()
            off += i * o
            params.append(w)
            b = None
            if layer["bias"]:
                b = torch.tensor(flat[off:off + o], dtype=torch.float64).requires_grad_()
                off += o
                params.append(b)
            mods.append(dense(w, b, ACT[layer["activation"]]))
        elif kind == "activation":
            mods.append(Func(ACT[layer["activation"]]))
        elif kind == "identity":
            mods.append(Func(lambda z: z))
        elif kind == "avgpool1d":
            # chainlet's (L, C) position-major features; PyTorch pools (N, C, L)
            c, w = layer["channels"], layer["window"]
            mods.append(Func(lambda z, c=c, w=w: torch.nn.functional.avg_pool1d(
                z.reshape(z.shape[0], -1, c).transpose(1, 2), w).transpose(1, 2).reshape(z.shape[0], -1)))
        elif kind == "maxpool1d":  # as avgpool1d
            c, w = layer["channels"], layer["window"]
            mods.append(Func(lambda z, c=c, w=w: torch.nn.functional.max_pool1d(
                z.reshape(z.shape[0], -1, c).transpose(1, 2), w).transpose(1, 2).reshape(z.shape[0], -1)))
        elif kind == "maxpool":  # chainlet's (H, W, C) pixel-major features; PyTorch pools (N, C, H, W)
            h, w, c, win = layer["height"], layer["width"], layer["channels"], tuple(layer["window"])
            mods.append(Func(lambda z, h=h, w=w, c=c, win=win: torch.nn.functional.max_pool2d(
                z.reshape(z.shape[0], h, w, c).permute(0, 3, 1, 2), win).permute(0, 2, 3, 1).reshape(z.shape[0], -1)))
        elif kind == "conv":
            # chainlet's (H, W, C) pixel-major features (a sequence (L, C) as (1, L, C)) and
            # W[((ky * KW + kx) * C + c) * OC + oc]: the leaf keeps chainlet's order, PyTorch reads it permuted
            h, w, c, (kh, kw), oc = layer["height"], layer["width"], layer["channels"], layer["kernel"], layer["out_channels"]
            wl = torch.tensor(flat[off:off + kh * kw * c * oc], dtype=torch.float64).reshape(kh, kw, c, oc).requires_grad_()
            off += kh * kw * c * oc
            bl = torch.tensor(flat[off:off + oc], dtype=torch.float64).requires_grad_()
            off += oc
            params += [wl, bl]
            act, pad = ACT[layer["activation"]], layer["padding"]
            stride, dilation = tuple(layer["stride"]), tuple(layer["dilation"])
            mods.append(Func(lambda z, h=h, w=w, c=c, wl=wl, bl=bl, act=act, pad=pad, stride=stride, dilation=dilation: act(
                torch.nn.functional.conv2d(z.reshape(z.shape[0], h, w, c).permute(0, 3, 1, 2), wl.permute(3, 2, 0, 1), bl,
                                           stride=stride, padding=pad, dilation=dilation)).permute(0, 2, 3, 1).reshape(z.shape[0], -1)))
        elif kind == "rms_norm":  # y = w x / sqrt(mean(x^2) + 1e-5), weight w (PyTorch 1.13 has no nn.RMSNorm)
            f = layer["features"]
            w = torch.tensor(flat[off:off + f], dtype=torch.float64).requires_grad_()
            off += f
            params.append(w)
            mods.append(Func(lambda z, w=w: z * torch.rsqrt((z * z).mean(dim=1, keepdim=True) + 1e-5) * w))
        elif kind == "layer_norm":  # nn.LayerNorm(f)'s formula: weight w, then bias b, eps 1e-5
            # Written out: through PyTorch 1.13's F.layer_norm the third derivative with respect to its input
            # is wrong (the parameter gradient of a loss of second derivatives, for a layer before it:
            # -15.97 where finite differences of its second derivatives and this composition give -7.84).
            f = layer["features"]
            w = torch.tensor(flat[off:off + f], dtype=torch.float64).requires_grad_()
            b = torch.tensor(flat[off + f:off + 2 * f], dtype=torch.float64).requires_grad_()
            off += 2 * f
            params += [w, b]

            def layer_norm(z, w=w, b=b):
                c = z - z.mean(dim=1, keepdim=True)
                return c * torch.rsqrt((c * c).mean(dim=1, keepdim=True) + 1e-5) * w + b
            mods.append(Func(layer_norm))
        elif kind == "softmax":
            mods.append(Func(lambda z: torch.softmax(z, dim=1)))
        elif kind == "global_avgpool":
            c = layer["channels"]
            mods.append(Func(lambda z, c=c: z.reshape(z.shape[0], -1, c).mean(dim=1)))
        elif kind == "fourier":  # frequencies B (M x F) in the parameters: fixed (gradient 0) or trainable
            m, f = layer["frequencies"], layer["in"]
            B = torch.tensor(flat[off:off + m * f], dtype=torch.float64).reshape(m, f)
            off += m * f
            mod = FourierFeatures(m, f, trainable=layer["trainable"]).double()
            with torch.no_grad():
                mod.B.copy_(B)
            if layer["trainable"]:
                params.append(mod.B)
            else:
                params.append(m * f)  # a fixed block: chainlet's gradient holds zeros there
            mods.append(mod)
        elif kind == "scale_shift":  # docs/api.md's user layer: y = a * x + b, parameters a then b
            f = layer["features"]
            a = torch.tensor(flat[off:off + f], dtype=torch.float64).requires_grad_()
            b = torch.tensor(flat[off + f:off + 2 * f], dtype=torch.float64).requires_grad_()
            off += 2 * f
            params += [a, b]
            mods.append(Func(lambda z, a=a, b=b: z * a + b))
        elif kind == "slice":
            mods.append(Slice(layer["first"], layer["count"]))
        elif kind == "residual":
            inner, off = build(layer["layers"], flat, off, params)
            mods.append(Residual(*inner))
        elif kind == "parallel":
            branches = []
            for br in layer["branches"]:
                seq, off = build(br, flat, off, params)
                branches.append(seq)
            mods.append(Parallel(layer["combine"], *branches))
        else:
            raise ValueError(f"unknown layer {kind}")
    return nn.Sequential(*mods), off


def check(case):
    torch.manual_seed(0)
    flat = case["params"]
    flat_params = []
    net, off = build(case["layers"], flat, 0, flat_params)
    assert off == len(flat)
    n, F, O, C = case["n"], case["inputs"], case["outputs"], case["columns"]
    x = torch.tensor(case["x"], dtype=torch.float64).reshape(n, F).requires_grad_()
    u = net(x)  # n x O
    cols = torch.zeros(n, O, C, dtype=torch.float64)
    keep = []
    for o in range(O):
        (du,) = torch.autograd.grad(u[:, o].sum(), x, create_graph=True)  # n x F
        cols[:, o, 0] = u[:, o].detach()
        lap = 0
        second = []
        for i in range(F):
            cols[:, o, 1 + i] = du[:, i].detach()
            (d2,) = torch.autograd.grad(du[:, i].sum(), x, create_graph=True)
            cols[:, o, 1 + F + i] = d2[:, i].detach()
            second.append(d2[:, i])
            lap = lap + d2[:, i]
        cols[:, o, 1 + 2 * F] = lap.detach()
        if o == 0:
            keep = (du, second, lap)
    chain = torch.tensor(case["derivatives"], dtype=torch.float64).reshape(n, O, C)
    worst = {"u": rel(chain[:, :, 0], cols[:, :, 0]), "grad u": rel(chain[:, :, 1:1 + F], cols[:, :, 1:1 + F]),
             "diag Hessian": rel(chain[:, :, 1 + F:1 + 2 * F], cols[:, :, 1 + F:1 + 2 * F]),
             "Laplacian": rel(chain[:, :, 1 + 2 * F], cols[:, :, 1 + 2 * F])}
    du, second, lap = keep
    res = case["residual"]
    r = res["a"] * u[:, 0] - torch.sin(x[:, 0])
    for i in range(F):
        r = r + res["b"][i] * du[:, i] + res["c"][i] * second[i]
    r = r + res["c"][F] * lap
    loss = (r * r).mean()
    tensors = [t for t in flat_params if isinstance(t, torch.Tensor)]
    grads = iter(torch.autograd.grad(loss, tensors))
    # W as (in, out) row-major is chainlet's W[i*out+o]; a fixed block (an int: its size) has gradient 0
    g = torch.cat([next(grads).flatten() if isinstance(t, torch.Tensor) else torch.zeros(t, dtype=torch.float64)
                   for t in flat_params])
    worst["loss"] = rel(case["loss"], loss.detach())
    worst["parameter gradient"] = rel(case["grad"], g)
    bad = {k: v for k, v in worst.items() if not v <= TOLERANCE}
    print(f"{case['name']}: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()) + ("  FAIL" if bad else "  ok"))
    return not bad


def main():
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    for f in glob.glob(os.path.join(work, "*.json")):
        os.remove(f)
    subprocess.run([exe, work], check=True)
    files = sorted(glob.glob(os.path.join(work, "*.json")))
    if not files:
        sys.exit("no cases written")
    ok = all([check(json.load(open(f))) for f in files])
    print(f"torch {torch.__version__}: {len(files)} cases, tolerance {TOLERANCE:g}: {'passed' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
