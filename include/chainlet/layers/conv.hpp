// Conv<KH, KW, OutChannels, Act, Pad, Stride = 1>: 2-D convolution (cross-correlation, as in PyTorch)
// on an input of shape (H, W, C), with valid or same zero padding. Stride 1 below; Stride > 1 (the same
// stride along both axes, valid padding only) at the end of this header.
//
// Parameters: the kernel W[((ky * KW + kx) * C + c) * OC + oc] (input-major, like Dense), then the bias
// b[oc]. Activations are feature-major per chunk: pixel (y, x), channel c of sample s at
// [((y * W + x) * C + c) * n + s].
//
//   z[y, x, oc] = b[oc] + sum_{ky, kx, c} W[ky, kx, c, oc] xp[y + ky, x + kx, c]     (xp: x padded)
// Pullback, with dz = dy * act'(z):
//   dW[ky, kx, c, oc] += sum_{y, x} xp[y + ky, x + kx, c] dz[y, x, oc],   db[oc] += sum_{y, x} dz[y, x, oc]
//   dx = the valid correlation of dz, zero-padded by (K - 1 - pad) on each side, with the kernel
//        rotated by 180 degrees and its channels swapped.
// Padding::same keeps H x W (for odd kernels; an even kernel pads one more at the bottom and right).
//
// PyTorch: nn.Conv2d(C, OC, (KH, KW), padding=0 or "same") followed by the activation's module, on
// (C, H, W) images; Conv2d.weight[oc][c][ky][kx] = W[((ky * KW + kx) * C + c) * OC + oc]. (PyTorch
// pads an even kernel's extra row and column on the same side as chainlet.)
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "chainlet/activations.hpp"
#include "chainlet/init.hpp"
#include "chainlet/kernel_instances.hpp"
#include "chainlet/kernels/conv.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/layers/conv_strided.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

enum class Padding { valid, same };

namespace detail {

// Conv's shape rule. Its bound layer is a specialisation for the images it takes (conv_takes); every
// other binding is the primary template, whose rejects_shape (layer.hpp) says what is wrong.
template <std::size_t KH, std::size_t KW, std::size_t OC, Padding Pad, std::size_t Stride>
inline constexpr bool conv_arguments_ok = KH > 0 && KW > 0 && OC > 0 && Stride > 0 &&
                                          (Pad == Padding::valid || Stride == 1);
template <std::size_t KH, std::size_t KW, std::size_t OC, Padding Pad, std::size_t Stride, std::size_t H, std::size_t W>
inline constexpr bool conv_takes =
    conv_arguments_ok<KH, KW, OC, Pad, Stride> && (Pad == Padding::same || (H >= KH && W >= KW));

// The first assertion that fails is the one error (each later one holds when an earlier one fails).
template <std::size_t KH, std::size_t KW, std::size_t OC, Padding Pad, std::size_t Stride, class InShape>
constexpr bool conv_rejects() {
    constexpr bool sizes_ok = KH > 0 && KW > 0 && OC > 0;
    static_assert(sizes_ok, "Conv<KH, KW, OutChannels>: all must be positive");
    static_assert(!sizes_ok || Stride > 0, "Conv: the stride must be positive");
    static_assert(!sizes_ok || Stride == 0 || Pad == Padding::valid || Stride == 1,
                  "Conv with stride > 1 takes Padding::valid only (PyTorch has no padding=\"same\" for strided "
                  "convolutions)");
    if constexpr (conv_arguments_ok<KH, KW, OC, Pad, Stride>) {
        static_assert(InShape::rank == 3,
                      "Conv needs an image input of shape (height, width, channels), e.g. Input<28, 28, 1>");
        if constexpr (InShape::rank == 3)
            static_assert(conv_takes<KH, KW, OC, Pad, Stride, InShape::dims[0], InShape::dims[1]>,
                          "Conv: the kernel is larger than the (padded) input image");
    }
    return true;
}

}  // namespace detail

// Stride > 1 is the primary template (defined at the end); stride 1 is this specialisation.
template <std::size_t KH, std::size_t KW, std::size_t OC, Activation Act = Identity, Padding Pad = Padding::valid,
          std::size_t Stride = 1>
struct Conv;

template <std::size_t KH, std::size_t KW, std::size_t OC, Activation Act, Padding Pad>
struct Conv<KH, KW, OC, Act, Pad, 1> {
    using activation = Act;

    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = detail::conv_rejects<KH, KW, OC, Pad, 1, InShape>();
    };

    template <std::size_t H, std::size_t W, std::size_t C>
        requires detail::conv_takes<KH, KW, OC, Pad, 1, H, W>
    struct bound<Shape<H, W, C>> {
        static constexpr bool same = Pad == Padding::same;
        static constexpr std::size_t pad_top = same ? (KH - 1) / 2 : 0, pad_bottom = same ? KH - 1 - pad_top : 0;
        static constexpr std::size_t pad_left = same ? (KW - 1) / 2 : 0, pad_right = same ? KW - 1 - pad_left : 0;
        static constexpr std::size_t XH = H + pad_top + pad_bottom, XW = W + pad_left + pad_right;  // padded input
        static constexpr std::size_t OH = XH - KH + 1, OW = XW - KW + 1;
        static constexpr std::size_t DH = H + KH - 1, DW = W + KW - 1;  // dz padded for the input gradient

        static constexpr std::size_t in_size = H * W * C;
        static constexpr std::size_t out_size = OH * OW * OC;
        using out_shape = Shape<OH, OW, OC>;
        static constexpr std::size_t K = KH * KW * C;
        static constexpr std::size_t num_weights = K * OC;
        static constexpr std::size_t num_params = num_weights + OC;
        static constexpr std::size_t xp_size = same ? XH * XW * C : 0;
        static constexpr std::size_t z_size = Act::derivative_from_output ? 0 : out_size;
        // Saved: [padded input (same only)] [pre-activation (softplus, GELU)]. Scratch: DH * DW * OC values
        // per sample (one sample's padded dz in pullback_one; a band of dy in pullback_from_rows; a chunk's
        // input gradient reads dz in place), then dz in blocks of channels for the weight gradient where the
        // kernel takes them (conv_dz_blocks), or dz transposed (along_channels).
        static constexpr bool dz_blocks = kernels::conv_dz_blocks(OC);
        // Where the weight gradient runs with its vectors along the output channels (pullback), on dz
        // transposed into the scratch that dz_blocks provides.
        template <class T>
        static constexpr bool along_channels = kernels::conv_weight_grad_along_channels_fits<T>(OC, KW);
        static_assert(!(along_channels<float> || along_channels<double>) || dz_blocks,
                      "Conv: the transposed dz needs the scratch of dz_blocks");
        static constexpr std::size_t saved_per_sample = xp_size + z_size;
        static constexpr std::size_t scratch_per_sample = DH * DW * OC + (dz_blocks ? out_size : 0);

        static constexpr auto patch = kernels::patch_offsets<KH, KW, C, XW>();
        static constexpr auto dz_patch = kernels::patch_offsets<KH, KW, OC, OW>();  // on dz itself (window only)
        // Where output pixel p = oy * OW + ox's patch starts in xp (the one-sample weight gradient).
        static constexpr auto pixel_offsets = [] {
            std::array<std::uint32_t, OH * OW> t{};
            for (std::size_t oy = 0; oy < OH; ++oy)
                for (std::size_t ox = 0; ox < OW; ++ox)
                    t[oy * OW + ox] = static_cast<std::uint32_t>((oy * XW + ox) * C);
            return t;
        }();
        // For dx: A(c, k') with k' = (ky', kx', oc) reads W[KH-1-ky', KW-1-kx', c, oc] = w[c * OC + flipped[k']].
        static constexpr auto flipped = [] {
            std::array<std::uint32_t, KH * KW * OC> t{};
            for (std::size_t ky = 0; ky < KH; ++ky)
                for (std::size_t kx = 0; kx < KW; ++kx)
                    for (std::size_t oc = 0; oc < OC; ++oc)
                        t[(ky * KW + kx) * OC + oc] =
                            static_cast<std::uint32_t>(((KH - 1 - ky) * KW + (KW - 1 - kx)) * C * OC + oc);
            return t;
        }();
        // Forward on the padded input (non-zero: the original image); input gradient on dz, read in place as
        // the window of its DH x DW zero-padded form.
        static constexpr kernels::ConvShape forward_shape{XW, C, OH, OW, OC, KH, KW, patch.data(),
                                                          pad_top, pad_top + H, pad_left, pad_left + W};
        static constexpr kernels::ConvShape input_grad_shape{OW, OC, H, W, C, KH, KW, dz_patch.data(),
                                                             KH - 1 - pad_top, KH - 1 - pad_top + OH,
                                                             KW - 1 - pad_left, KW - 1 - pad_left + OW, true};

        // The derivative passes' rules (layers/conv_rules.hpp) and the linear parts they are made of.
        using jet_rule = detail::ConvJetRule<bound>;
        using hvp_rule = detail::ConvHvpRule<bound>;
        using activation = Act;
        using identity_twin = typename Conv<KH, KW, OC, Identity, Pad>::template bound<Shape<H, W, C>>;
        static constexpr kernels::Edges forward_edges =
            (same && KW > 1) ? kernels::Edges::staircases : kernels::Edges::union_of_taps;

        template <class T>
        static void init(std::span<T> p, Rng& rng, InitKind kind) {
            // Glorot with PyTorch's fans for a convolution: fan_in = C KH KW, fan_out = OC KH KW.
            fill_glorot(p.first(num_weights), static_cast<double>((C + OC) * KH * KW), rng, kind);
            std::fill(p.begin() + num_weights, p.end(), T(0));
        }

        // The input the correlation reads: x, or (same) its zero-padded copy written to saved.
        template <class T>
        static const T* padded_input(const T* x, T* saved, std::size_t n) {
            if constexpr (same) {
                kernels::pad_copy(x, H, W, C, n, pad_top, pad_left, pad_bottom, pad_right, saved);
                return saved;
            } else {
                return x;
            }
        }

        template <class T>
        static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n) {
            using namespace kernels;
            const T* xp = padded_input(x, saved, n);
            T* z = Act::derivative_from_output ? nullptr : saved + xp_size * n;
            if (n == 1) return forward_one(p, xp, y, z);
            conv_valid<Act, Init::row_bias, forward_edges>(forward_shape, p, 1, Stride{static_cast<std::ptrdiff_t>(OC)}, xp, n, y, p + num_weights, z);
        }

        // z = W * x without the bias and the activation (saved: the padded input, as identity_twin saves it).
        template <class T>
        static void forward_linear(const T* w, const T* x, T* z, T* saved, std::size_t n) {
            using namespace kernels;
            const T* xp = padded_input(x, saved, n);
            conv_valid<NoEpilogue, Init::zero, forward_edges>(forward_shape, w, 1, Stride{static_cast<std::ptrdiff_t>(OC)}, xp, n, z, static_cast<const T*>(nullptr), static_cast<T*>(nullptr));
        }

        // dx = W^T dz: the valid correlation of dz (read in place as the window of its padded form).
        template <class T>
        static void input_cotangent(const T* w, const T* dz, T* dx, T*, std::size_t n) {
            using namespace kernels;
            conv_valid<NoEpilogue, Init::zero, (KW > 1 ? Edges::window_only : Edges::union_of_taps)>(
                input_grad_shape, w, OC, Table{flipped.data(), 1}, dz, n, dx, static_cast<const T*>(nullptr),
                static_cast<T*>(nullptr));
        }

        // One sample (a single image at inference, an ODE right-hand side): conv_valid's vectors, along the
        // samples, would hold one lane. Here they run along the output channels instead, which W stores
        // side by side for each tap: output row oy is the product (OW x OC) = act(b + A W) with
        // A(ox, k) = xp[(oy * XW + ox) * C + patch[k]], one nn_panel call per row. Each output still adds
        // its products in the order of k, over every tap (the padding's zeros included, which conv_valid
        // skips: the same sums but for the sign of a zero, unless a weight is infinite or NaN).
        template <class T>
        static void forward_one(const T* p, const T* xp, T* y, T* z) {
            using namespace kernels;
            if constexpr (C == 1 && OC < simd::width<T>) return forward_one_along_pixels(p, xp, y, z);
            constexpr auto ocs = static_cast<std::ptrdiff_t>(OC);
            for (std::size_t oy = 0; oy < OH; ++oy) {
                const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(oy * OW * OC);
                const Tile<T, Table, Stride> t{KRange::all(K), xp + oy * XW * C, static_cast<std::ptrdiff_t>(C),
                                               Table{patch.data(), 1}, p, Stride{ocs}, simd::width<T>,
                                               y + row, ocs, simd::width<T>, p + num_weights, z ? z + row : nullptr};
                nn_panel<Act, Init::col_bias>(OW, OC, t);
            }
        }

        // One input channel and fewer output channels than a vector holds (LeNet5's first convolution: 6
        // of 16 lanes; nn_panel would run a quarter vector and two scalar columns): the vectors run along
        // the output pixels of a row instead, which one input channel makes contiguous in xp. Blocks of up
        // to 64 pixels of a row are the product (OC x pixels) = act(b + W^T B), B(k, ox) = xp[(oy * XW + ox)
        // + patch[k]], into a small tile that is then transposed into y (and z). The same sums, in the
        // same order of k, as forward_one's other route.
        template <class T>
        static void forward_one_along_pixels(const T* p, const T* xp, T* y, T* z) {
            using namespace kernels;
            constexpr std::size_t block = std::min<std::size_t>(64, OW);
            T tile_y[OC * block], tile_z[OC * block];
            for (std::size_t oy = 0; oy < OH; ++oy)
                for (std::size_t ox0 = 0; ox0 < OW; ox0 += block) {
                    const std::size_t pixels = std::min(block, OW - ox0);
                    const Tile<T, Stride, Table, UnitStride> t{
                        KRange::all(K), p, unit_stride, Stride{static_cast<std::ptrdiff_t>(OC)}, xp + oy * XW + ox0,
                        Table{patch.data(), 1}, simd::width<T>, tile_y, static_cast<std::ptrdiff_t>(block),
                        simd::width<T>, p + num_weights, z ? tile_z : nullptr};
                    nn_panel<Act, Init::row_bias>(OC, pixels, t);
                    const std::size_t first = (oy * OW + ox0) * OC;
                    scatter_transpose(static_cast<const T*>(tile_y), OC, pixels, y + first, block);
                    if (z) scatter_transpose(static_cast<const T*>(tile_z), OC, pixels, z + first, block);
                }
        }

        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                             std::size_t n) {
            using namespace kernels;
            const T* xp = same ? saved : x;
            if (n == 1) return pullback_one(p, g, xp, Act::derivative_from_output ? y : saved + xp_size, scratch, dy, dx);
            const T* act_s = Act::derivative_from_output ? y : saved + xp_size * n;
            T* dz_scratch = dz_blocks ? scratch + DH * DW * OC * n : nullptr;
            if constexpr (along_channels<T>) {
                // dz = act'(s) dy in place and db += its channel sums; dz transposed to dzt[(p * n + j) * OC + oc];
                // dW += the products along the channels (kernels/conv.hpp says why)
                activation_pullback_channel_sums<Act>(OH * OW, OC, dy, act_s, n, g + num_weights);
                transpose_channels_samples(OH * OW, OC, n, static_cast<const T*>(dy), dz_scratch);
                conv_weight_grad_along_channels(forward_shape, xp, static_cast<const T*>(dz_scratch), n, g);
            } else {
                conv_activation_parameter_grads<Act>(forward_shape, xp, dy, act_s, n, g, g + num_weights, dz_scratch);
            }
            if (dx) input_cotangent(p, static_cast<const T*>(dy), dx, scratch, n);
        }

        // The pullback with dy produced band by band (layer.hpp's optional pullback_from_rows; chain.hpp calls
        // it when a MaxPool follows): rows(r0, r1, out) writes output rows [r0, r1) of dy to out. Where the
        // parameter gradients run in bands of output rows (conv_band_rows, not along_channels) and no dx is
        // wanted (the first layer), each band of dy is produced into scratch and used from L1 there, so the
        // whole dy is never written; otherwise rows fills dy whole and pullback runs. The same bits either way.
        template <class T, class Rows>
        static void pullback_from_rows(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                                       std::size_t n, Rows&& rows, std::size_t row_block) {
            using namespace kernels;
            // bands need their weight-gradient sums to fit the carried state (conv_band_rows): known here
            // at compile time, so that the banded route is not compiled for a layer that cannot take it
            constexpr bool bands_fit = K * OC <= conv_band_state && OC <= conv_band_channels;
            const std::size_t band = bands_fit ? conv_band_rows<T>(forward_shape, n) : 0;
            if (dx || band == 0 || along_channels<T>) {
                rows(std::size_t{0}, OH, dy);
                return pullback(p, g, x, y, saved, scratch, dy, dx, n);
            }
            if constexpr (bands_fit) {
                // Bands of whole row blocks. scratch holds DH * DW * OC * n values, more than a band of at
                // most OH * OW * OC * n.
                const std::size_t height = std::max(row_block, band / row_block * row_block);
                const T* xp = same ? saved : x;
                const T* act_s = Act::derivative_from_output ? y : saved + xp_size * n;
                conv_activation_parameter_grads_banded<Act>(forward_shape, xp, act_s, n, g, g + num_weights, height,
                                                            [&](std::size_t r0, std::size_t r1) {
                                                                rows(r0, r1, scratch);
                                                                return scratch;
                                                            });
            }
        }

        // One sample, vectors along the channels as in forward_one (the chunk route's run along the samples):
        // dz = act'(s) dy in place; db += dz's column sums; per kernel row ky, the weight rows of ky (KW * C
        // of them, contiguous in the patch) += A^T dz with A(p, kx * C + c) = xp[pixel_offsets[p] +
        // (ky * XW + kx) * C + c] over all output pixels p, one panel each (one gemm_nn per output row and
        // kernel row added the same products in the same order, in fewer calls); dx from the padded dz
        // by conv_input_grad_one.
        // The same sums as the chunk route's in another order, over the padding's zeros too (which the
        // chunk route skips in part: the sign of a zero can differ, and an infinite or NaN weight or dz
        // reaches more of them).
        // One input channel and fewer output channels than a vector holds (LeNet5's first convolution: the
        // gemm_nn calls ran 6 of 16 lanes): dW and db run along the output pixels instead, by
        // conv_weight_grad_one_along_pixels on dz transposed into scratch (before dx's padded dz takes
        // it), all lanes busy. Its sums run over XW - OW zero columns of dz past each output row, whose products meet input values of the next
        // row: an infinite or NaN input value reaches more weights there (as NaN) than on the other route.
        template <class T>
        static void pullback_one(const T* p, T* g, const T* xp, const T* s, T* scratch, T* dy, T* dx) {
            using namespace kernels;
            activation_pullback<Act>(dy, s, out_size);
            if constexpr (C == 1 && OC < simd::width<T>) {
                conv_weight_grad_one_along_pixels(OH, OW, XW, OC, KH, KW, xp, static_cast<const T*>(dy), scratch, g,
                                                  g + num_weights);
            } else {
                const T one(1);
                gemm_nn<NoEpilogue, Init::accumulate>(1, OC, OH * OW, &one, 0, 0, dy, OC, g + num_weights, OC);
                constexpr auto ocs = static_cast<std::ptrdiff_t>(OC);
                for (std::size_t ky = 0; ky < KH; ++ky) {
                    const Tile<T, Table, Stride, UnitStride> t{
                        KRange::all(OH * OW), xp + ky * XW * C, unit_stride, Table{pixel_offsets.data(), 1}, dy,
                        Stride{ocs}, simd::width<T>, g + ky * KW * C * OC, ocs, simd::width<T>, nullptr, nullptr};
                    nn_panel<NoEpilogue, Init::accumulate>(KW * C, OC, t);
                }
            }
            if (dx) {
                T* dzp = scratch;
                pad_copy_sides(static_cast<const T*>(dy), OH, OW, OC, 1, KH - 1 - pad_top, KW - 1 - pad_left,
                               KW - 1 - pad_right, dzp);
                conv_input_grad_one(H, W, C, OC, KH, KW, DW, KH - 1 - pad_top, KH - 1 - pad_top + OH, dzp, p, dx);
            }
        }

        static std::string describe() {
            return "Conv[" + std::to_string(KH) + "x" + std::to_string(KW) + "," + std::to_string(OC) + "," + Act::name +
                   "," + (same ? "same" : "valid") + "]";
        }
        static void torch_layout(TorchModules& m, std::size_t offset) {
            const std::string name = m.next_module();
            TorchTensor weight{name + ".weight", {OC, C, KH, KW}, std::vector<std::size_t>(OC * C * KH * KW)};
            for (std::size_t oc = 0; oc < OC; ++oc)
                for (std::size_t c = 0; c < C; ++c)
                    for (std::size_t ky = 0; ky < KH; ++ky)
                        for (std::size_t kx = 0; kx < KW; ++kx)
                            weight.source[((oc * C + c) * KH + ky) * KW + kx] = offset + ((ky * KW + kx) * C + c) * OC + oc;
            TorchTensor bias{name + ".bias", {OC}, std::vector<std::size_t>(OC)};
            for (std::size_t oc = 0; oc < OC; ++oc) bias.source[oc] = offset + num_weights + oc;
            m.add(std::move(weight));
            m.add(std::move(bias));
            m.natural_order();
            m.activation(Act::name);
        }
    };
};

// Conv<KH, KW, OC, Act, Padding::valid, Stride> with Stride > 1: output ((H - KH) / Stride + 1,
// (W - KW) / Stride + 1, OC) (floor, as PyTorch; trailing rows and columns a stride does not reach get a
// zero gradient). The math is in layers/conv_strided.hpp. PyTorch: nn.Conv2d(C, OC, (KH, KW),
// stride=Stride) and the activation's module; weight layout as for stride 1. Padding::same is refused:
// PyTorch has no padding="same" for strided convolutions, so it would have no PyTorch equivalent.
template <std::size_t KH, std::size_t KW, std::size_t OC, Activation Act, Padding Pad, std::size_t Stride>
struct Conv {
    using activation = Act;

    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = detail::conv_rejects<KH, KW, OC, Pad, Stride, InShape>();
    };

    template <std::size_t H, std::size_t W, std::size_t C>
        requires detail::conv_takes<KH, KW, OC, Pad, Stride, H, W>
    struct bound<Shape<H, W, C>> : detail::strided_conv_bound<H, W, C, KH, KW, OC, Act, 0, 0, 0, 0, Stride, Stride, 1, 1> {
        using base = detail::strided_conv_bound<H, W, C, KH, KW, OC, Act, 0, 0, 0, 0, Stride, Stride, 1, 1>;
        using out_shape = Shape<base::OH, base::OW, OC>;
        using jet_rule = detail::ConvJetRule<bound>;  // the derivative passes' rules (layers/conv_rules.hpp)
        using hvp_rule = detail::ConvHvpRule<bound>;

        static std::string describe() {
            return "Conv[" + std::to_string(KH) + "x" + std::to_string(KW) + "," + std::to_string(OC) + "," + Act::name +
                   ",valid,stride=" + std::to_string(Stride) + "]";
        }
        static void torch_layout(TorchModules& m, std::size_t offset) {
            detail::conv_torch_layout(m, offset, C, OC, {KH, KW}, Act::name);
        }
    };
};

}  // namespace chainlet
