// The strided and dilated convolution that Conv<..., Stride> (stride > 1, layers/conv.hpp) and Conv1D
// (stride or dilation > 1, layers/conv1d.hpp) are bound to: not a layer type of its own, but the whole
// bound layer except its metadata, which each layer adds.
//
// Input (H, W, C), zero-padded by (PT, PB) rows and (PL, PR) columns; stride (SH, SW), dilation (DH, DW);
// output OH = (H + PT + PB - DH (KH - 1) - 1) / SH + 1 rows (floor, as PyTorch), OW likewise.
// Parameters as in Conv: W[((ky * KW + kx) * C + c) * OC + oc], then b[oc].
//
//   z[oy, ox, oc] = b[oc] + sum_{ky, kx, c} W[ky, kx, c, oc] xp[oy SH + ky DH, ox SW + kx DW, c]
// Pullback, with dz = dy * act'(z):
//   dW[ky, kx, c, oc] += sum_{oy, ox} xp[oy SH + ky DH, ox SW + kx DW, c] dz[oy, ox, oc],  db[oc] += sum dz
//   dxp[oy SH + ky DH, ox SW + kx DW, c] += sum_oc W[ky, kx, c, oc] dz[oy, ox, oc]; dx = dxp without padding.
// Input rows a stride skips get a zero gradient.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "chainlet/activations.hpp"
#include "chainlet/init.hpp"
#include "chainlet/kernel_instances.hpp"
#include "chainlet/kernels/conv.hpp"
#include "chainlet/kernels/conv_strided.hpp"
#include "chainlet/layers/conv_rules.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet::detail {

template <std::size_t H, std::size_t W, std::size_t C, std::size_t KH, std::size_t KW, std::size_t OC, class Act,
          std::size_t PT, std::size_t PB, std::size_t PL, std::size_t PR, std::size_t SH, std::size_t SW, std::size_t DH,
          std::size_t DW>
struct strided_conv_bound {
    static constexpr bool padded = PT + PB + PL + PR > 0;
    static constexpr std::size_t XH = H + PT + PB, XW = W + PL + PR;  // padded input
    static constexpr std::size_t span_h = DH * (KH - 1) + 1, span_w = DW * (KW - 1) + 1;
    static_assert(XH >= span_h && XW >= span_w, "convolution: the (dilated) kernel is larger than the padded input");
    static constexpr std::size_t OH = (XH - span_h) / SH + 1, OW = (XW - span_w) / SW + 1;

    static constexpr std::size_t in_size = H * W * C;
    static constexpr std::size_t out_size = OH * OW * OC;
    static constexpr std::size_t num_weights = KH * KW * C * OC;
    static constexpr std::size_t num_params = num_weights + OC;
    static constexpr std::size_t xp_size = padded ? XH * XW * C : 0;
    static constexpr std::size_t z_size = Act::derivative_from_output ? 0 : out_size;
    // Saved: [padded input (if padded)] [pre-activation (softplus, GELU)]. Scratch: the padded dx.
    static constexpr std::size_t saved_per_sample = xp_size + z_size;
    static constexpr std::size_t scratch_per_sample = xp_size;
    static constexpr kernels::StridedConvShape geometry{XH, XW, C, OH, OW, OC, KH, KW, SH, SW, DH, DW};
    // The linear parts of the derivative passes' rules (layers/conv_rules.hpp): the same convolution
    // without an activation, and the two linear maps below.
    using activation = Act;
    using identity_twin = strided_conv_bound<H, W, C, KH, KW, OC, Identity, PT, PB, PL, PR, SH, SW, DH, DW>;

    template <class T>
    static void init(std::span<T> p, Rng& rng, InitKind kind) {
        // Glorot with PyTorch's fans for a convolution: fan_in = C KH KW, fan_out = OC KH KW.
        fill_glorot(p.first(num_weights), static_cast<double>((C + OC) * KH * KW), rng, kind);
        std::fill(p.begin() + num_weights, p.end(), T(0));
    }

    // The input the correlation reads: x, or (padded) its zero-padded copy written to saved.
    template <class T>
    static const T* padded_input(const T* x, T* saved, std::size_t n) {
        if constexpr (padded) {
            kernels::pad_copy(x, H, W, C, n, PT, PL, PB, PR, saved);
            return saved;
        } else {
            return x;
        }
    }

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n) {
        const T* xp = padded_input(x, saved, n);
        T* z = Act::derivative_from_output ? nullptr : saved + xp_size * n;
        kernels::strided_conv_forward<Act>(geometry, p, p + num_weights, xp, n, y, z);
    }

    // z = W * x without the bias and the activation (saved: the padded input, as identity_twin saves it).
    template <class T>
    static void forward_linear(const T* w, const T* x, T* z, T* saved, std::size_t n) {
        const T* xp = padded_input(x, saved, n);
        const std::array<T, OC> zero{};
        kernels::strided_conv_forward<Identity>(geometry, w, zero.data(), xp, n, z, static_cast<T*>(nullptr));
    }

    // dx = W^T dz (through the padded dx in scratch when padded).
    template <class T>
    static void input_cotangent(const T* w, const T* dz, T* dx, T* scratch, std::size_t n) {
        if constexpr (padded) {
            kernels::strided_conv_input_grad(geometry, w, dz, n, scratch);
            kernels::crop_copy(static_cast<const T*>(scratch), H, W, C, n, PT, PL, PR, dx);
        } else {
            kernels::strided_conv_input_grad(geometry, w, dz, n, dx);
        }
    }

    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                         std::size_t n) {
        kernels::activation_pullback_channel_sums<Act>(OH * OW, OC, dy, Act::derivative_from_output ? y : saved + xp_size * n,
                                                       n, g + num_weights);
        const T* xp = padded ? saved : x;
        kernels::strided_conv_weight_grad(geometry, xp, dy, n, g);
        if (dx) input_cotangent(p, static_cast<const T*>(dy), dx, scratch, n);
    }
};

// The PyTorch weight and bias of a convolution whose chainlet weight is W[(k * C + c) * OC + oc] with
// k the tap in row-major order over the kernel extents `kernel` (PyTorch: weight[oc][c][k...]).
inline void conv_torch_layout(TorchModules& m, std::size_t offset, std::size_t C, std::size_t OC,
                              const std::vector<std::uint64_t>& kernel, const std::string& activation) {
    std::size_t taps = 1;
    for (auto e : kernel) taps *= e;
    const std::string name = m.next_module();
    std::vector<std::uint64_t> shape{OC, C};
    shape.insert(shape.end(), kernel.begin(), kernel.end());
    TorchTensor weight{name + ".weight", shape, std::vector<std::size_t>(OC * C * taps)};
    for (std::size_t oc = 0; oc < OC; ++oc)
        for (std::size_t c = 0; c < C; ++c)
            for (std::size_t k = 0; k < taps; ++k) weight.source[(oc * C + c) * taps + k] = offset + (k * C + c) * OC + oc;
    TorchTensor bias{name + ".bias", {OC}, std::vector<std::size_t>(OC)};
    for (std::size_t oc = 0; oc < OC; ++oc) bias.source[oc] = offset + taps * C * OC + oc;
    m.add(std::move(weight));
    m.add(std::move(bias));
    m.natural_order();
    m.activation(activation);
}

}  // namespace chainlet::detail
