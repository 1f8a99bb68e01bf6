"""PyTorch modules for chainlet's containers, so that a chainlet model exported to safetensors
(chainlet::export_safetensors) loads into the equivalent PyTorch model with load_state_dict(strict=True).

A chainlet Chain is an nn.Sequential of its layers (a fused activation is a module of its own). The
containers map to the modules below; their tensor names follow from the attribute names:
  Residual<Layers...>                 Residual(nn.Sequential(...))             "<i>.f.<j>.weight"
  Parallel<Combine, Branch<...>...>   Parallel("concat"|"sum"|"product"|"dot",
                                               nn.Sequential(...), ...)        "<i>.branches.<b>.<j>.weight"
  Slice<First, Count>                 Slice(first, count)                      (no tensors)
  FourierFeatures<M, ...>             FourierFeatures(M, F)                    "<i>.B" (M x F; a buffer,
  TrainableFourierFeatures<M, ...>    FourierFeatures(M, F, trainable=True)    a parameter when trainable)
  RMSNorm                             RMSNorm(features)                        "<i>.weight"
  GRU<H, ReturnSequence>              GRU(F, H, return_sequence)               "<i>.weight_ih_l0" ...
  LSTM<H, ReturnSequence>             LSTM(F, H, return_sequence)              "<i>.weight_ih_l0" ...
(RMSNorm: PyTorch 2.4's nn.RMSNorm(features, eps=1e-5) is the same module; this one is for older PyTorch.)
Inputs are (batch, features), or (batch, C, H, W) for images (chainlet keeps (H, W, C) per sample), or
(batch, T, F) for sequences (chainlet's Input<T, F>, the same order).
"""
import torch
from torch import nn


class Residual(nn.Module):
    """y = x + f(x)."""

    def __init__(self, *layers):
        super().__init__()
        self.f = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.f(x)


class Parallel(nn.Module):
    """Every branch reads x; outputs combined by concat (features), sum, product or dot (sum over
    features of the elementwise product, one output)."""

    def __init__(self, combine, *branches):
        super().__init__()
        if combine not in ("concat", "sum", "product", "dot"):
            raise ValueError(f"combine must be concat, sum, product or dot, not {combine!r}")
        self.combine = combine
        self.branches = nn.ModuleList(branches)

    def forward(self, x):
        outs = [b(x) for b in self.branches]
        if self.combine == "concat":
            return torch.cat(outs, dim=1)
        y = outs[0]
        for o in outs[1:]:
            y = y + o if self.combine == "sum" else y * o
        return y.sum(dim=1, keepdim=True) if self.combine == "dot" else y


class Slice(nn.Module):
    """Features first .. first + count - 1 of a flat input."""

    def __init__(self, first, count):
        super().__init__()
        self.first, self.count = first, count

    def forward(self, x):
        return x[:, self.first:self.first + self.count]


class Sin(nn.Module):
    """chainlet's activation Sin<Num, Den>: sin(omega z), omega = Num / Den (the module in the slot of a
    Dense<N, Sin<...>>'s activation or an ActivationLayer<Sin<...>>)."""

    def __init__(self, omega=1.0):
        super().__init__()
        self.omega = omega

    def forward(self, x):
        return torch.sin(self.omega * x)


class FourierFeatures(nn.Module):
    """chainlet's FourierFeatures<M, ...>: [sin(2 pi x B^T), cos(2 pi x B^T)] for x (batch, F), B (M, F) the
    layer's frequencies (row-major, as in chainlet's parameter buffer): a buffer in the state dict, or with
    trainable=True (chainlet's TrainableFourierFeatures) a parameter. load_state_dict fills it."""

    def __init__(self, m, f, trainable=False):
        super().__init__()
        B = torch.zeros(m, f)
        if trainable:
            self.B = nn.Parameter(B)
        else:
            self.register_buffer("B", B)

    def forward(self, x):
        z = 2 * torch.pi * (x @ self.B.to(x.dtype).T)
        return torch.cat([torch.sin(z), torch.cos(z)], dim=1)


class RMSNorm(nn.Module):
    """chainlet's RMSNorm, PyTorch 2.4's nn.RMSNorm(n, eps=1e-5) written out for older PyTorch (Debian's
    1.13 has none): x / sqrt(mean(x^2) + eps) * weight over the last dimension."""

    def __init__(self, n, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class GRU(nn.GRU):
    """chainlet's GRU<H, ReturnSequence>: nn.GRU(F, H, batch_first=True) (one layer, both biases), which
    returns (output, h_n); this module returns output[:, -1], the last hidden state (batch, H), or with
    return_sequence the whole output (batch, T, H). The state_dict is nn.GRU's."""

    def __init__(self, input_size, hidden_size, return_sequence=False):
        super().__init__(input_size, hidden_size, batch_first=True)
        self.return_sequence = return_sequence

    def forward(self, x):
        output, _ = super().forward(x)
        return output if self.return_sequence else output[:, -1]


class LSTM(nn.LSTM):
    """chainlet's LSTM<H, ReturnSequence>: nn.LSTM(F, H, batch_first=True), returning output[:, -1] or
    (return_sequence) output, as GRU above. The state_dict is nn.LSTM's."""

    def __init__(self, input_size, hidden_size, return_sequence=False):
        super().__init__(input_size, hidden_size, batch_first=True)
        self.return_sequence = return_sequence

    def forward(self, x):
        output, _ = super().forward(x)
        return output if self.return_sequence else output[:, -1]
