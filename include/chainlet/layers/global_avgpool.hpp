// GlobalAvgPool: the mean of each channel over all positions of an image (H, W, C) or a sequence (L, C);
// the output is C values. No parameters.
//
//   y[c] = (1 / P) sum_p x[p, c]   (P = H W or L positions);   pullback: dx[p, c] = dy[c] / P.
//
// PyTorch: two modules, so a GlobalAvgPool takes two module indices in the nn.Sequential:
//   image (C, H, W):  nn.AdaptiveAvgPool2d(1), nn.Flatten()
//   sequence (C, L):  nn.AdaptiveAvgPool1d(1), nn.Flatten()
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/kernels/vector_loop.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

struct GlobalAvgPool {
    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(InShape::rank == 2 || InShape::rank == 3,
                          "GlobalAvgPool needs an image (height, width, channels) or a sequence (length, channels)");
            return InShape::rank != 2 && InShape::rank != 3;
        }();
        static constexpr std::size_t C = InShape::dims[InShape::rank - 1];
        static constexpr std::size_t P = InShape::size / C;  // positions
        static constexpr std::size_t in_size = InShape::size;
        static constexpr std::size_t out_size = C;
        using out_shape = Shape<C>;
        static constexpr std::size_t num_params = 0;
        static constexpr std::size_t saved_per_sample = 0, scratch_per_sample = 0;
        using jet_rule = detail::LinearLayerJetRule<bound>;  // the derivative passes' rules (jet.hpp)
        using hvp_rule = detail::LinearLayerHvpRule<bound>;

        template <class T>
        static void init(std::span<T>, Rng&, InitKind) {}

        template <class T>
        static void forward(const T*, const T* x, T* y, T*, std::size_t n) {
            const T scale = T(1) / T(P);
            for (std::size_t c = 0; c < C; ++c)
                kernels::vectors_then_scalars<T>(n, [&]<class V>(std::size_t e) {
                    V sum = simd::loadv<V>(x + c * n + e);
                    for (std::size_t p = 1; p < P; ++p) sum += simd::loadv<V>(x + (p * C + c) * n + e);
                    simd::storev(y + c * n + e, sum * V(scale));
                });
        }

        template <class T>
        static void pullback(const T*, T*, const T*, const T*, T*, T*, T* dy, T* dx, std::size_t n) {
            if (!dx) return;
            const T scale = T(1) / T(P);
            for (std::size_t c = 0; c < C; ++c)
                kernels::vectors_then_scalars<T>(n, [&]<class V>(std::size_t e) {
                    const V share = simd::loadv<V>(dy + c * n + e) * V(scale);
                    for (std::size_t p = 0; p < P; ++p) simd::storev(dx + (p * C + c) * n + e, share);
                });
        }

        static std::string describe() { return "GlobalAvgPool"; }
        static void torch_layout(TorchModules& m, std::size_t) {
            m.skip_module();  // nn.AdaptiveAvgPool2d(1) or nn.AdaptiveAvgPool1d(1)
            m.skip_module();  // nn.Flatten()
            m.natural_order();
        }
    };
};

}  // namespace chainlet
