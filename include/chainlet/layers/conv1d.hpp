// Conv1D<K, OutChannels, Act, Pad, Stride = 1, Dilation = 1>: 1-D convolution (cross-correlation, as in
// PyTorch) along a sequence Input<L, C> (length L, C channels last; position l, channel c of sample s at
// [(l * C + c) * n + s] in a feature-major chunk). Output (OL, OC) with span = Dilation (K - 1) + 1 and
//   valid: OL = (L - span) / Stride + 1 (floor);   same (stride 1 only): OL = L, the input padded by
//   (span - 1) / 2 zeros in front and the rest at the end (an even span pads one more at the end).
//
// Parameters: the kernel W[(k * C + c) * OC + oc] (input-major, like Conv and Dense), then the bias b[oc].
//   z[l, oc] = b[oc] + sum_{k, c} W[k, c, oc] xp[l Stride + k Dilation, c],   y = act(z)
// Pullback, with dz = dy * act'(z):
//   dW[k, c, oc] += sum_l xp[l Stride + k Dilation, c] dz[l, oc],   db[oc] += sum_l dz[l, oc]
//   dxp[l Stride + k Dilation, c] += sum_oc W[k, c, oc] dz[l, oc];   dx = dxp without the padding.
//
// A sequence (L, C) is an image (1, L, C) in memory, so stride 1 without dilation is Conv<1, K, OC, Act,
// Pad> on (1, L, C) (its tiled kernels, whose tiles of 4 neighbouring output pixels then run along the
// sequence); stride or dilation > 1 is the loop nest of layers/conv_strided.hpp.
//
// PyTorch: nn.Conv1d(C, OC, K, stride=Stride, dilation=Dilation, padding=0 or "same") and the
// activation's module, on (C, L) sequences (transpose chainlet's (L, C)); Conv1d.weight[oc][c][k] =
// W[(k * C + c) * OC + oc]. PyTorch pads "same" as chainlet does; it refuses "same" with a stride, and
// so does chainlet.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "chainlet/activations.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/layers/conv.hpp"
#include "chainlet/layers/conv_strided.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

namespace detail {

template <std::size_t K, std::size_t OC, class Act, Padding Pad, std::size_t Stride, std::size_t Dilation, std::size_t L,
          std::size_t C>
struct conv1d_impl {
    static constexpr std::size_t span = Dilation * (K - 1) + 1;
    static constexpr bool same = Pad == Padding::same;
    static constexpr std::size_t pad_front = same ? (span - 1) / 2 : 0, pad_back = same ? span - 1 - pad_front : 0;
    static constexpr std::size_t Lb = same || L >= span ? L : span;  // leaves a too-short input to Conv1D's error
    // The sequence as an image one row high, so the register tiles of Conv run along the sequence.
    using type = std::conditional_t<
        Stride == 1 && Dilation == 1, typename Conv<1, K, OC, Act, Pad>::template bound<Shape<1, Lb, C>>,
        strided_conv_bound<1, Lb, C, 1, K, OC, Act, 0, 0, pad_front, pad_back, 1, Stride, 1, Dilation>>;
};

}  // namespace detail

template <std::size_t K, std::size_t OC, Activation Act = Identity, Padding Pad = Padding::valid, std::size_t Stride = 1,
          std::size_t Dilation = 1>
struct Conv1D {
    static_assert(K > 0 && OC > 0, "Conv1D<K, OutChannels>: both must be positive");
    static_assert(Stride > 0 && Dilation > 0, "Conv1D: stride and dilation must be positive");
    static_assert(Pad == Padding::valid || Stride == 1,
                  "Conv1D with stride > 1 takes Padding::valid only (PyTorch has no padding=\"same\" for strided "
                  "convolutions)");
    using activation = Act;
    static constexpr std::size_t span = Dilation * (K - 1) + 1;  // input positions one output reads

    template <class InShape>
    struct bound {
        static_assert(InShape::rank == 2,
                      "Conv1D needs a sequence input of shape (length, channels), e.g. Input<100, 3>; for an image "
                      "(height, width, channels) use Conv");
    };

    template <std::size_t L, std::size_t C>
    struct bound<Shape<L, C>> : detail::conv1d_impl<K, OC, Act, Pad, Stride, Dilation, L, C>::type {
        static_assert(Pad == Padding::same || L >= span,
                      "Conv1D: the kernel (Dilation * (K - 1) + 1 positions) is longer than the unpadded input "
                      "sequence; shorten the kernel or use Padding::same");
        using base = typename detail::conv1d_impl<K, OC, Act, Pad, Stride, Dilation, L, C>::type;
        static constexpr std::size_t OL = base::OW;
        using out_shape = Shape<OL, OC>;

        static std::string describe() {
            std::string s = "Conv1D[" + std::to_string(K) + "," + std::to_string(OC) + "," + Act::name + "," +
                            (Pad == Padding::same ? "same" : "valid");
            if (Stride != 1) s += ",stride=" + std::to_string(Stride);
            if (Dilation != 1) s += ",dilation=" + std::to_string(Dilation);
            return s + "]";
        }
        static void torch_layout(TorchModules& m, std::size_t offset) {
            detail::conv_torch_layout(m, offset, C, OC, {K}, Act::name);
        }
    };
};

}  // namespace chainlet
