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

// The input positions one output reads: K taps, Dilation apart.
template <std::size_t K, std::size_t Dilation>
inline constexpr std::size_t conv1d_span = Dilation * (K - 1) + 1;

template <std::size_t K, std::size_t OC, class Act, Padding Pad, std::size_t Stride, std::size_t Dilation, std::size_t L,
          std::size_t C>
struct conv1d_impl {
    static constexpr std::size_t span = conv1d_span<K, Dilation>;
    static constexpr bool same = Pad == Padding::same;
    static constexpr std::size_t pad_front = same ? (span - 1) / 2 : 0, pad_back = same ? span - 1 - pad_front : 0;
    // The sequence as an image one row high, so the register tiles of Conv run along the sequence.
    using type = std::conditional_t<
        Stride == 1 && Dilation == 1, typename Conv<1, K, OC, Act, Pad>::template bound<Shape<1, L, C>>,
        strided_conv_bound<1, L, C, 1, K, OC, Act, 0, 0, pad_front, pad_back, 1, Stride, 1, Dilation>>;
};

// Conv1D's shape rule, as Conv's (layers/conv.hpp): the specialisation takes the sequences of conv1d_takes,
// the primary template's rejects_shape says what is wrong with the rest.
template <std::size_t K, std::size_t OC, Padding Pad, std::size_t Stride, std::size_t Dilation>
inline constexpr bool conv1d_arguments_ok = K > 0 && OC > 0 && Stride > 0 && Dilation > 0 &&
                                            (Pad == Padding::valid || Stride == 1);
template <std::size_t K, std::size_t OC, Padding Pad, std::size_t Stride, std::size_t Dilation, std::size_t L>
inline constexpr bool conv1d_takes =
    conv1d_arguments_ok<K, OC, Pad, Stride, Dilation> && (Pad == Padding::same || L >= conv1d_span<K, Dilation>);

template <std::size_t K, std::size_t OC, Padding Pad, std::size_t Stride, std::size_t Dilation, class InShape>
constexpr bool conv1d_rejects() {  // as conv_rejects (layers/conv.hpp)
    constexpr bool sizes_ok = K > 0 && OC > 0, steps_ok = Stride > 0 && Dilation > 0;
    static_assert(sizes_ok, "Conv1D<K, OutChannels>: both must be positive");
    static_assert(!sizes_ok || steps_ok, "Conv1D: stride and dilation must be positive");
    static_assert(!sizes_ok || !steps_ok || Pad == Padding::valid || Stride == 1,
                  "Conv1D with stride > 1 takes Padding::valid only (PyTorch has no padding=\"same\" for strided "
                  "convolutions)");
    if constexpr (conv1d_arguments_ok<K, OC, Pad, Stride, Dilation>) {
        static_assert(InShape::rank == 2,
                      "Conv1D needs a sequence input of shape (length, channels), e.g. Input<100, 3>; for an image "
                      "(height, width, channels) use Conv");
        if constexpr (InShape::rank == 2)
            static_assert(conv1d_takes<K, OC, Pad, Stride, Dilation, InShape::dims[0]>,
                          "Conv1D: the kernel (Dilation * (K - 1) + 1 positions) is longer than the unpadded input "
                          "sequence; shorten the kernel or use Padding::same");
    }
    return true;
}

}  // namespace detail

template <std::size_t K, std::size_t OC, Activation Act = Identity, Padding Pad = Padding::valid, std::size_t Stride = 1,
          std::size_t Dilation = 1>
struct Conv1D {
    using activation = Act;
    static constexpr std::size_t span = detail::conv1d_span<K, Dilation>;  // input positions one output reads

    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = detail::conv1d_rejects<K, OC, Pad, Stride, Dilation, InShape>();
    };

    template <std::size_t L, std::size_t C>
        requires detail::conv1d_takes<K, OC, Pad, Stride, Dilation, L>
    struct bound<Shape<L, C>> : detail::conv1d_impl<K, OC, Act, Pad, Stride, Dilation, L, C>::type {
        using base = typename detail::conv1d_impl<K, OC, Act, Pad, Stride, Dilation, L, C>::type;
        static constexpr std::size_t OL = base::OW;
        using out_shape = Shape<OL, OC>;
        using jet_rule = detail::ConvJetRule<bound>;  // the derivative passes' rules (layers/conv_rules.hpp)
        using hvp_rule = detail::ConvHvpRule<bound>;

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
