#!/usr/bin/env python3
"""PyTorch round trip of chainlet's safetensors export/import (run by ctest as pytorch_roundtrip).

  pytorch_roundtrip.py <pytorch_roundtrip program>... <work dir>

1. chainlet -> PyTorch: the C++ programs export models (random parameters) (an MLP with tanh, a small conv chain,
   LeNet5, a Conv1D sequence net, a strided-conv net with average pooling, a GRU into an LSTM; float32 and float64) and its predictions on fixed inputs; this script reads the files with
   json + numpy only, builds the equivalent nn.Sequential (written out here, independently of the C++
   side), loads the weights with load_state_dict(strict=True) and compares the predictions.
2. PyTorch -> chainlet: this script writes safetensors files of freshly initialised PyTorch models and
   their predictions; the C++ program imports them and compares its own predictions.
Predictions agree when max|a - b| <= 1e-5 max|reference|. Exits 77 (ctest's SKIP_RETURN_CODE) when
torch or numpy cannot be imported.
"""
import json
import os
import struct
import subprocess
import sys

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError as e:  # the test is skipped, visibly
    print(f"SKIP: PyTorch round trip needs torch and numpy in {sys.executable}: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from chainlet_torch import RMSNorm  # noqa: E402  (PyTorch 2.4's nn.RMSNorm(n, eps=1e-5), written out)
from chainlet_torch import GRU, LSTM  # noqa: E402  (nn.GRU/nn.LSTM returning output[:, -1] or output)

TOLERANCE = 1e-5
DTYPES = {"F32": (np.float32, torch.float32), "F64": (np.float64, torch.float64)}


def mlp():
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))


def smallconv():  # chainlet: Input<12,10,2>, Conv<3,3,4,ReLU>, MaxPool<2>, Conv<3,3,5,Tanh,same>, MaxPool<2>, ...
    return nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 5, 3, padding="same"),
                         nn.Tanh(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(5 * 2 * 2, 7), nn.Tanh(),
                         nn.Linear(7, 3))


def lenet5():
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 120), nn.ReLU(), nn.Linear(120, 84),
                         nn.ReLU(), nn.Linear(84, 10))


def issue13():  # chainlet: Issue13 in pytorch_roundtrip.cpp; eval mode: Dropout is the identity, as in predict
    return nn.Sequential(nn.Conv2d(2, 3, 2), nn.ELU(), nn.Flatten(), nn.LayerNorm(18), nn.Dropout(0.25),
                         nn.Linear(18, 8), nn.GELU(), RMSNorm(8), nn.Linear(8, 5), nn.LeakyReLU(0.2), nn.SiLU(),
                         nn.Linear(5, 3), nn.Softmax(dim=1)).eval()


def seqconv():  # chainlet: Input<20,3>, Conv1D<5,8,ReLU,same>, MaxPool1D<2>, Conv1D<3,6,Tanh,valid,2>, ...
    model = nn.Sequential(nn.Conv1d(3, 8, 5, padding="same"), nn.ReLU(), nn.MaxPool1d(2),
                          nn.Conv1d(8, 6, 3, stride=2), nn.Tanh(), nn.AvgPool1d(2),
                          nn.Conv1d(6, 4, 2, padding="same", dilation=2), nn.Softplus(), nn.Flatten(),
                          nn.Linear(4 * 2, 3))
    # Its inputs stay in chainlet's (L, C) sample layout; PyTorch's Conv1d wants (C, L). A forward pre-hook
    # transposes, so the state_dict names are the plain nn.Sequential indices.
    model.register_forward_pre_hook(lambda module, args: (args[0].transpose(1, 2),))
    return model


def stridedconv():  # chainlet: Input<15,13,2>, Conv<3,3,6,ReLU,valid,2>, AvgPool<2>, Conv<2,2,4,Tanh>, GlobalAvgPool, ...
    return nn.Sequential(nn.Conv2d(2, 6, 3, stride=2), nn.ReLU(), nn.AvgPool2d(2), nn.Conv2d(6, 4, 2), nn.Tanh(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))


def recurrent():  # chainlet: Input<9, 3>, GRU<6, true>, LSTM<5>, Dense<2>; input (batch, 9, 3) in both
    return nn.Sequential(GRU(3, 6, return_sequence=True), LSTM(6, 5), nn.Linear(5, 2))


MODELS = {"mlp": mlp, "smallconv": smallconv, "lenet5": lenet5, "seqconv": seqconv, "stridedconv": stridedconv,
          "issue13": issue13, "recurrent": recurrent}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        np_type = DTYPES[t["dtype"]][0]
        tensors[name] = np.frombuffer(body[b:e], dtype=np.dtype(np_type).newbyteorder("<")).reshape(t["shape"])
    return tensors


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        dtype = "F32" if a.dtype == np.float32 else "F64"
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def to_torch_input(x):
    """chainlet's sample layout (H, W, C) -> PyTorch's (C, H, W); flat inputs are unchanged."""
    return x.transpose(0, 3, 1, 2) if x.ndim == 4 else x


def to_chainlet_input(x):
    return x.transpose(0, 2, 3, 1) if x.ndim == 4 else x


def relative_error(a, ref):
    return float(np.max(np.abs(a - ref)) / np.max(np.abs(ref)))


def main():
    tools, work = sys.argv[1:-1], sys.argv[-1]
    os.makedirs(work, exist_ok=True)
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    for name in MODELS:  # nothing left from an earlier run counts as exported
        for dtype in DTYPES:
            for suffix in (".safetensors", "_io.safetensors"):
                path = os.path.join(work, f"{name}_{dtype}{suffix}")
                if os.path.exists(path):
                    os.remove(path)
    for tool in tools:
        subprocess.run([tool, "export", work], check=True)
    failures = 0
    missing = [name for name in MODELS if not os.path.exists(os.path.join(work, f"{name}_F32.safetensors"))]
    if missing:
        print(f"FAIL: models no program exported: {', '.join(missing)}")
        return 1

    # chainlet -> PyTorch
    for dtype, (np_type, torch_type) in DTYPES.items():
        for name, build in MODELS.items():
            stem = os.path.join(work, f"{name}_{dtype}")
            params = read_safetensors(stem + ".safetensors")
            io = read_safetensors(stem + "_io.safetensors")
            model = build().to(torch_type)
            model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in params.items()}, strict=True)
            with torch.no_grad():
                out = model(torch.from_numpy(to_torch_input(io["inputs"]).copy())).numpy()
            err = relative_error(out, io["outputs"])
            ok = err <= TOLERANCE and out.dtype == np_type
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} chainlet -> torch {name} {dtype}: max |diff| / max |chainlet| = {err:.3g}")

    # PyTorch -> chainlet
    torch.manual_seed(5)
    rng = np.random.default_rng(6)
    for dtype, (np_type, torch_type) in DTYPES.items():
        for name, build in MODELS.items():
            model = build().to(torch_type)
            shape = {"mlp": (5, 4), "smallconv": (5, 2, 12, 10), "lenet5": (5, 1, 28, 28),
                     "seqconv": (5, 20, 3), "stridedconv": (5, 2, 15, 13), "issue13": (5, 2, 4, 3),
                     "recurrent": (5, 9, 3)}[name]
            x = rng.standard_normal(shape).astype(np_type)
            with torch.no_grad():
                out = model(torch.from_numpy(x)).numpy()
            stem = os.path.join(work, f"{name}_{dtype}_torch")
            write_safetensors(stem + ".safetensors", {k: v.numpy() for k, v in model.state_dict().items()})
            write_safetensors(stem + "_io.safetensors", {"inputs": to_chainlet_input(x), "outputs": out})
    for tool in tools:
        failures += subprocess.run([tool, "import", work]).returncode != 0
    print("PyTorch round trip:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
