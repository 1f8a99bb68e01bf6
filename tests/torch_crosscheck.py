#!/usr/bin/env python3
"""PyTorch autograd cross-check of chainlet's gradients (ctest torch_crosscheck).

  torch_crosscheck.py <torch_crosscheck program>... <work dir>

The program writes, per model, chainlet's parameters (PyTorch names and layouts), inputs, targets, loss,
parameter gradient and input gradient in float64 (tests/torch_crosscheck.cpp). Here each model is
rebuilt in PyTorch (written out independently, with the container modules of python/chainlet_torch.py),
loaded with load_state_dict(strict=True), and its loss (mean over samples of the summed squared error),
parameter gradients and input gradient by autograd must agree with chainlet's to 1e-9 relative
(max |a - b| / max |b| per tensor). Exits 77 (ctest's SKIP_RETURN_CODE) without torch or numpy.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError as e:
    print(f"SKIP: the PyTorch cross-check needs torch and numpy in {sys.executable}: {e}")
    sys.exit(77)

from chainlet_torch import Parallel, Residual, Slice  # noqa: E402
from pytorch_roundtrip import read_safetensors  # noqa: E402  (json + numpy, no safetensors package)
from chainlet_torch import GRU, LSTM  # noqa: E402  (the recurrent layers' modules)

TOLERANCE = 1e-9


class ScaleShift(nn.Module):
    """The user layer of docs/api.md (tests/user_layer.hpp): y = scale * x + shift per feature."""

    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(n))
        self.shift = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        return self.scale * x + self.shift


def same_conv(c, oc):
    return nn.Conv2d(c, oc, 3, padding="same")


def sequence_input(model):
    """chainlet keeps a sequence sample as (L, C), PyTorch's Conv1d as (C, L): transpose on the way in
    (a forward pre-hook, so the state_dict names stay those of the nn.Sequential)."""
    model.register_forward_pre_hook(lambda module, args: (args[0].transpose(1, 2),))
    return model


MODELS = {
    "residual_mlp": lambda: nn.Sequential(
        nn.Linear(5, 8), nn.Tanh(),
        Residual(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.GELU(approximate="tanh")),
        Residual(nn.Linear(8, 8), nn.Softplus()),
        nn.Linear(8, 3)),
    "deeponet": lambda: nn.Sequential(
        Parallel("dot",
                 nn.Sequential(Slice(0, 10), nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 6)),
                 nn.Sequential(Slice(10, 2), nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 6), nn.Tanh())),
        nn.Linear(1, 1)),
    "parallel_mix": lambda: nn.Sequential(
        Parallel("concat", nn.Sequential(nn.Linear(6, 4), nn.Tanh()),
                 nn.Sequential(Slice(1, 3), nn.Linear(3, 2), nn.Sigmoid())),
        Parallel("sum", nn.Sequential(nn.Linear(6, 5), nn.Tanh()), nn.Sequential(nn.Linear(6, 5)),
                 nn.Sequential(Residual(nn.Linear(6, 6), nn.ReLU()), nn.Linear(6, 5))),
        Parallel("product", nn.Sequential(nn.Linear(5, 3), nn.Tanh()), nn.Sequential(nn.Linear(5, 3), nn.Softplus()),
                 nn.Sequential(nn.Linear(5, 3, bias=False)))),
    "user_layer": lambda: nn.Sequential(ScaleShift(4), nn.Linear(4, 6), nn.Tanh(), ScaleShift(6), nn.Linear(6, 2)),
    "conv_residual": lambda: nn.Sequential(
        same_conv(2, 4), nn.Tanh(),
        Residual(same_conv(4, 4), nn.Tanh(), same_conv(4, 4)),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 2, 3)),
    # --- issue 13, 1-D convolutions, strided convolution, average pooling (layers13b) ---
    "conv1d_net": lambda: sequence_input(nn.Sequential(
        nn.Conv1d(3, 4, 3), nn.Tanh(),
        nn.Conv1d(4, 5, 2, padding="same"), nn.Softplus(),
        nn.MaxPool1d(2),
        nn.Conv1d(5, 4, 3, stride=2),
        nn.Flatten(), nn.Linear(4 * 2, 3))),
    "conv1d_dilated_gap": lambda: sequence_input(nn.Sequential(
        nn.Conv1d(2, 6, 3, padding="same", dilation=2), nn.Sigmoid(),
        nn.Conv1d(6, 4, 2, dilation=3), nn.Tanh(),
        nn.AvgPool1d(3),
        nn.Conv1d(4, 3, 2, stride=2), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(),
        nn.Linear(3, 2))),
    "strided_conv_pool": lambda: nn.Sequential(
        nn.Conv2d(2, 4, 3, stride=2), nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Conv2d(4, 5, 2), nn.Softplus(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(5, 3)),
    "few_inputs_batch": lambda: nn.Sequential(
        nn.Linear(3, 9), nn.Tanh(), nn.Linear(9, 4), nn.Softplus(), nn.Linear(4, 5), nn.Tanh(),
        nn.Linear(5, 2, bias=False)),
    "wide_batch": lambda: nn.Sequential(
        nn.Linear(7, 9), nn.Tanh(), nn.Linear(9, 6), nn.GELU(approximate="tanh"), nn.Linear(6, 5, bias=False),
        nn.Tanh(), nn.Linear(5, 2)),
    "strided_conv_flatten": lambda: nn.Sequential(
        nn.Conv2d(3, 4, (2, 3), stride=3), nn.GELU(approximate="tanh"),
        nn.AvgPool2d((1, 2)), nn.Flatten(), nn.Linear(3 * 1 * 4, 2)),
    # --- end issue 13 (layers13b) ---
    # --- recurrent layers: chainlet_torch.GRU/LSTM are nn.GRU/nn.LSTM(batch_first=True) returning
    # output[:, -1] (the last hidden state) or output (ReturnSequence) ---
    "gru_last": lambda: nn.Sequential(GRU(3, 5), nn.Linear(5, 2)),
    "lstm_sequence": lambda: nn.Sequential(LSTM(3, 4, return_sequence=True), nn.Flatten(), nn.Linear(6 * 4, 2)),
    "gru_sequence_lstm": lambda: nn.Sequential(GRU(2, 4, return_sequence=True), LSTM(4, 3), nn.Linear(3, 1)),
    "lstm_gru_sequence": lambda: nn.Sequential(LSTM(3, 5, return_sequence=True), GRU(5, 3, return_sequence=True),
                                               nn.Flatten(), nn.Linear(4 * 3, 2), nn.Tanh()),
    # --- end of the recurrent layers ---
}


# ---- issue 13: standalone activations, Softmax, LayerNorm, RMSNorm, Dropout (layers13a) ----
from chainlet_torch import RMSNorm  # noqa: E402  (PyTorch 2.4's nn.RMSNorm(n, eps=1e-5), written out)

class RecordedDropout(nn.Dropout):
    """nn.Dropout(p) in train mode with chainlet's mask: the file holds the multipliers (0 or 1 / (1 - p),
    PyTorch's scaling, which is checked) as "dropout_mask.<module name>"."""

    mask = None

    def forward(self, x):
        keep = 1.0 / (1.0 - self.p)
        ok = torch.isclose(self.mask, torch.tensor(keep, dtype=self.mask.dtype), rtol=1e-15, atol=0) | (self.mask == 0)
        assert bool(ok.all()), "a dropout multiplier is neither 0 nor 1 / (1 - p)"
        assert bool((self.mask == 0).any()) and bool((self.mask != 0).any()), "the case's mask drops all or nothing"
        return x * self.mask


MODELS_ISSUE13 = {
    "activations_standalone": lambda: nn.Sequential(
        nn.Linear(5, 7), nn.ELU(), nn.Linear(7, 6), nn.LeakyReLU(0.2), nn.SiLU(), nn.Linear(6, 5), nn.GELU(), nn.GELU(),
        nn.Linear(5, 4), nn.ELU(), nn.Linear(4, 3), nn.SiLU(), nn.Softmax(dim=1)),
    "norms": lambda: nn.Sequential(
        nn.Conv2d(2, 3, 2), nn.Tanh(), nn.Flatten(), nn.LayerNorm(6), nn.Linear(6, 7), nn.Tanh(), RMSNorm(7),
        nn.Linear(7, 3)),
    "dropout_training": lambda: nn.Sequential(
        nn.Linear(6, 9), nn.Tanh(), RecordedDropout(0.3), nn.Linear(9, 5), nn.Tanh(), RecordedDropout(1 / 3),
        nn.Linear(5, 2)),
}
MODELS.update(MODELS_ISSUE13)
# The convolution nets on one sample, where chainlet's stride-1 convolutions take their one-sample forward
# and pullback; the grey-image net's first convolution (one input channel, 5 outputs) runs its vectors along
# the pixels of a row.
MODELS.update({f"{k}_one_sample": MODELS[k] for k in ("conv_residual", "conv1d_net")})
# Two samples: chainlet runs them one at a time where Workspace::one_by_one is 2 (doubles with AVX-512).
MODELS["conv_residual_two_samples"] = MODELS["conv_residual"]
MODELS["gray_conv_one_sample"] = lambda: nn.Sequential(
    nn.Conv2d(1, 5, 3), nn.Tanh(), nn.Conv2d(5, 3, 2, padding="same"), nn.Softplus(), nn.Flatten(),
    nn.Linear(3 * 7 * 8, 2))
# Channels a multiple of 4: with 32 vector registers chainlet's weight gradient reads dz in blocks of 4.
MODELS["conv_channel_blocks"] = lambda: nn.Sequential(
    nn.Conv2d(3, 8, 3), nn.Tanh(), nn.Conv2d(8, 12, 2, padding="same"), nn.Softplus(), nn.Flatten(),
    nn.Linear(12 * 5 * 6, 2))
# ---- end of issue 13 (layers13a) ----
# A convolution's pullback fed band by band by the max pooling after it (16 samples: bands with AVX-512).
MODELS["conv_pool_bands"] = lambda: nn.Sequential(
    nn.Conv2d(1, 6, 5), nn.Softplus(), nn.MaxPool2d((3, 2)), nn.Flatten(), nn.Linear(6 * 7 * 12, 3))


def to_torch_layout(a):
    """chainlet keeps an image sample as (H, W, C); PyTorch as (C, H, W)."""
    return a.transpose(0, 3, 1, 2) if a.ndim == 4 else a


def rel(a, b):
    scale = max(float(np.max(np.abs(b))), 1e-300)
    return float(np.max(np.abs(a - b))) / scale


def check(path, name):
    t = {k: v.astype(np.float64) for k, v in read_safetensors(path).items()}
    torch.manual_seed(0)
    model = MODELS[name]().double()
    params = {k: torch.from_numpy(v) for k, v in t.items()
              if not k.startswith("grad") and not k.startswith("dropout_mask.")
              and k not in ("input", "target", "loss", "dx")}
    model.load_state_dict(params, strict=True)
    for mname, m in model.named_modules():  # training-mode cases: chainlet's Dropout masks
        if isinstance(m, nn.Dropout):
            m.mask = torch.from_numpy(t["dropout_mask." + mname])
    x = torch.from_numpy(to_torch_layout(t["input"])).requires_grad_(True)
    y = model(x)
    target = torch.from_numpy(t["target"])
    loss = ((y - target) ** 2).sum() / x.shape[0]
    loss.backward()
    errors = {"loss": rel(np.array([loss.item()]), t["loss"]),
              "dx": rel(x.grad.numpy(), to_torch_layout(t["dx"])),
              "pullback vs value_and_gradient": rel(t["grad_from_pullback"], t["grad_flat"])}
    for pname, p in model.named_parameters():
        errors["grad." + pname] = rel(p.grad.numpy(), t["grad." + pname])
    worst = max(errors.values())
    status = "ok" if worst <= TOLERANCE else "FAIL"
    print(f"{status} {name}: worst relative error {worst:.2e} over {len(errors)} tensors "
          f"({', '.join(f'{k} {v:.1e}' for k, v in errors.items() if v > TOLERANCE) or 'all within 1e-9'})")
    return worst <= TOLERANCE


def main():
    programs, work = sys.argv[1:-1], sys.argv[-1]
    os.makedirs(work, exist_ok=True)
    written = []
    for program in programs:
        out = subprocess.run([program, work], check=True, stdout=subprocess.PIPE, text=True).stdout
        sys.stdout.write(out)
        written += [line[len("wrote "):].split(":")[0] for line in out.splitlines() if line.startswith("wrote ")]
    # every case a program writes is checked (one without a model here would pass unnoticed), and every
    # model here must have been written by one of the programs
    unchecked = [name for name in written if name not in MODELS]
    if unchecked:
        print(f"FAIL: cases written without a PyTorch model in this script: {', '.join(unchecked)}")
        sys.exit(1)
    results = [check(os.path.join(work, f"{name}.safetensors"), name) if name in written else False
               for name in MODELS]
    missing = [name for name in MODELS if name not in written]
    if missing:
        print(f"FAIL: models no program wrote: {', '.join(missing)}")
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
