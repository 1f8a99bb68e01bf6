// Conv<KH, KW, OutChannels, Act, Pad>: 2-D convolution (cross-correlation, as in PyTorch), stride 1,
// on an input of shape (H, W, C), with valid or same zero padding.
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
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "chainlet/activations.hpp"
#include "chainlet/kernels/conv.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

enum class Padding { valid, same };

template <std::size_t KH, std::size_t KW, std::size_t OC, Activation Act = Identity, Padding Pad = Padding::valid>
struct Conv {
    static_assert(KH > 0 && KW > 0 && OC > 0, "Conv<KH, KW, OutChannels>: all must be positive");
    using activation = Act;

    template <class InShape>
    struct bound {
        static_assert(InShape::rank == 3,
                      "Conv needs an image input of shape (height, width, channels), e.g. Input<28, 28, 1>");
    };

    template <std::size_t H, std::size_t W, std::size_t C>
    struct bound<Shape<H, W, C>> {
        static constexpr bool same = Pad == Padding::same;
        static constexpr std::size_t pad_top = same ? (KH - 1) / 2 : 0, pad_bottom = same ? KH - 1 - pad_top : 0;
        static constexpr std::size_t pad_left = same ? (KW - 1) / 2 : 0, pad_right = same ? KW - 1 - pad_left : 0;
        static constexpr std::size_t XH = H + pad_top + pad_bottom, XW = W + pad_left + pad_right;  // padded input
        static_assert(XH >= KH && XW >= KW, "Conv: the kernel is larger than the (padded) input image");
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
        // aux: [padded input (same only)] [pre-activation (softplus, GELU)] [padded dz, pullback scratch]
        static constexpr std::size_t aux_per_sample = xp_size + z_size + DH * DW * OC;

        static constexpr auto patch = kernels::patch_offsets<KH, KW, C, XW>();
        static constexpr auto dz_patch = kernels::patch_offsets<KH, KW, OC, DW>();
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
        // Forward on the padded input (non-zero: the original image); input gradient on the padded dz.
        static constexpr kernels::ConvShape forward_shape{XW, C, OH, OW, OC, KH, KW, patch.data(),
                                                          pad_top, pad_top + H, pad_left, pad_left + W};
        static constexpr kernels::ConvShape input_grad_shape{DW, OC, H, W, C, KH, KW, dz_patch.data(),
                                                             KH - 1 - pad_top, KH - 1 - pad_top + OH,
                                                             KW - 1 - pad_left, KW - 1 - pad_left + OW};

        template <class T>
        static void init(std::span<T> p, Rng& rng, InitKind kind) {
            // Glorot with PyTorch's fans for a convolution: fan_in = C KH KW, fan_out = OC KH KW.
            const double fan = static_cast<double>((C + OC) * KH * KW);
            for (std::size_t j = 0; j < num_weights; ++j)
                p[j] = static_cast<T>(kind == InitKind::glorot_uniform ? std::sqrt(6.0 / fan) * (2 * rng.uniform() - 1)
                                                                       : std::sqrt(2.0 / fan) * rng.normal());
            for (std::size_t j = num_weights; j < num_params; ++j) p[j] = T(0);
        }

        template <class T>
        static void forward(const T* p, const T* x, T* y, T* aux, std::size_t n) {
            using namespace kernels;
            const T* xp = x;
            if constexpr (same) {
                pad_copy(x, H, W, C, n, pad_top, pad_left, pad_bottom, pad_right, aux);
                xp = aux;
            }
            T* z = Act::derivative_from_output ? nullptr : aux + xp_size * n;
            conv_valid<Act, Init::row_bias>(forward_shape, p, 1, Stride{static_cast<std::ptrdiff_t>(OC)}, xp, n, y, p + num_weights, z);
        }

        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T* y, T* aux, T* dy, T* dx, std::size_t n) {
            using namespace kernels;
            activation_pullback<Act>(dy, Act::derivative_from_output ? y : aux + xp_size * n, out_size * n);
            const T* xp = same ? aux : x;
            conv_weight_grad(forward_shape, xp, dy, n, g);
            channel_sums_add(OH * OW, OC, dy, n, g + num_weights);
            if (dx) {
                T* dzp = aux + (xp_size + z_size) * n;
                pad_copy(static_cast<const T*>(dy), OH, OW, OC, n, KH - 1 - pad_top, KW - 1 - pad_left,
                         KH - 1 - pad_bottom, KW - 1 - pad_right, dzp);
                conv_valid<NoEpilogue, Init::zero>(input_grad_shape, p, OC, Table{flipped.data(), 1}, dzp, n, dx,
                                                 nullptr, nullptr);
            }
        }
    };
};

}  // namespace chainlet
