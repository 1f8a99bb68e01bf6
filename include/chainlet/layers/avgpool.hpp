// AvgPool<PH, PW>: the mean over non-overlapping PH x PW windows of an (H, W, C) image, per channel; the
// output is (H / PH, W / PW, C) (trailing rows and columns that do not fill a window are dropped, as in
// PyTorch). No parameters.
//
//   y[oy, ox, c] = (1 / (PH PW)) sum_{wy, wx} x[oy PH + wy, ox PW + wx, c]
// Pullback: dx[oy PH + wy, ox PW + wx, c] = dy[oy, ox, c] / (PH PW); dropped rows and columns get 0.
//
// PyTorch: nn.AvgPool2d((PH, PW)) on (C, H, W) images (stride = the window, no padding).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>

#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/kernels/vector_loop.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/layers/maxpool.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

template <std::size_t PH, std::size_t PW = PH>
struct AvgPool {
    // The bound layer is the specialisation for the images the window fits; the primary template's
    // rejects_shape (layer.hpp) says what is wrong with any other binding.
    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(PH > 0 && PW > 0, "AvgPool<PH, PW>: window sizes must be positive");
            if constexpr (PH > 0 && PW > 0) {
                static_assert(InShape::rank == 3,
                              "AvgPool needs an image input of shape (height, width, channels); for a sequence (length, "
                      "channels) use AvgPool1D");
                if constexpr (InShape::rank == 3)
                    static_assert(InShape::dims[0] >= PH && InShape::dims[1] >= PW,
                                  "AvgPool: the window is larger than the image");
            }
            return true;
        }();
    };

    template <std::size_t H, std::size_t W, std::size_t C>
        requires(PH > 0 && PW > 0 && H >= PH && W >= PW)
    struct bound<Shape<H, W, C>> {
        static constexpr std::size_t OH = H / PH, OW = W / PW;
        static constexpr std::size_t in_size = H * W * C;
        static constexpr std::size_t out_size = OH * OW * C;
        using out_shape = Shape<OH, OW, C>;
        static constexpr std::size_t num_params = 0;
        static constexpr std::size_t saved_per_sample = 0, scratch_per_sample = 0;
        using jet_rule = detail::LinearLayerJetRule<bound>;  // the derivative passes' rules (jet.hpp)
        using hvp_rule = detail::LinearLayerHvpRule<bound>;

        template <class T>
        static void init(std::span<T>, Rng&, InitKind) {}

        // The same windows as MaxPool: f(at, out_offset, m) for every output pixel, at(wy, wx) the offset of
        // the window element's block of m = C n values.
        template <class F>
        static void for_each_window(std::size_t n, F&& f) {
            MaxPool<PH, PW>::template bound<Shape<H, W, C>>::for_each_window(n, f);
        }

        template <class T>
        static void forward(const T*, const T* x, T* y, T*, std::size_t n) {
            const T scale = T(1) / T(PH * PW);
            for_each_window(n, [&](auto at, std::size_t out, std::size_t m) {
                kernels::vectors_then_scalars<T>(m, [&]<class V>(std::size_t e) {
                    V sum = simd::loadv<V>(x + at(0, 0) + e);
                    for (std::size_t wy = 0; wy < PH; ++wy)
                        for (std::size_t wx = 0; wx < PW; ++wx)
                            if (wy || wx) sum += simd::loadv<V>(x + at(wy, wx) + e);
                    simd::storev(y + out + e, sum * V(scale));
                });
            });
        }

        template <class T>
        static void pullback(const T*, T*, const T*, const T*, T*, T*, T* dy, T* dx, std::size_t n) {
            if (!dx) return;
            if constexpr (H % PH != 0 || W % PW != 0) std::fill_n(dx, in_size * n, T(0));
            const T scale = T(1) / T(PH * PW);
            for_each_window(n, [&](auto at, std::size_t out, std::size_t m) {
                kernels::vectors_then_scalars<T>(m, [&]<class V>(std::size_t e) {
                    const V share = simd::loadv<V>(dy + out + e) * V(scale);
                    for (std::size_t wy = 0; wy < PH; ++wy)
                        for (std::size_t wx = 0; wx < PW; ++wx) simd::storev(dx + at(wy, wx) + e, share);
                });
            });
        }

        static std::string describe() { return "AvgPool[" + std::to_string(PH) + "x" + std::to_string(PW) + "]"; }
        static void torch_layout(TorchModules& m, std::size_t) {
            m.skip_module();  // nn.AvgPool2d((PH, PW))
            m.natural_order();
        }
    };
};

}  // namespace chainlet
