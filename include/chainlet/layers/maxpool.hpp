// MaxPool<PH, PW>: the maximum over non-overlapping PH x PW windows of an (H, W, C) image, per channel;
// the output is (H / PH, W / PW, C) (trailing rows and columns that do not fill a window are dropped,
// as in PyTorch). No parameters.
//
// Pullback: each window passes its output cotangent to the position of its maximum. Ties go to the
// first maximal position in the window's row-major order, so the gradient is deterministic and every
// cotangent is passed exactly once. The position is recomputed from x and y, so nothing is stored.
//
// NaN: a window holding a NaN gives NaN, wherever the NaN is (as PyTorch's max_pool2d), and its
// cotangent goes to the first NaN. The hardware max returns its second operand when one is NaN, so
// alone it would keep a NaN only in a window's last position; the forward ORs a NaN mask per element.
//
// In the derivative passes (jet_rule, hvp_rule; layer.hpp): piecewise linear, the same selection for
// every jet column and for R x (the rules' comment in the bound layer).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>

#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

template <std::size_t PH, std::size_t PW = PH>
struct MaxPool {
    // The bound layer is the specialisation for the images the window fits; the primary template's
    // rejects_shape (layer.hpp) says what is wrong with any other binding.
    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(PH > 0 && PW > 0, "MaxPool<PH, PW>: window sizes must be positive");
            if constexpr (PH > 0 && PW > 0) {
                static_assert(InShape::rank == 3,
                              "MaxPool needs an image input of shape (height, width, channels)");
                if constexpr (InShape::rank == 3)
                    static_assert(InShape::dims[0] >= PH && InShape::dims[1] >= PW,
                                  "MaxPool: the window is larger than the image");
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
        using in_shape = Shape<H, W, C>;
        using out_shape = Shape<OH, OW, C>;
        static constexpr std::size_t num_params = 0;
        static constexpr std::size_t saved_per_sample = 0, scratch_per_sample = 0;

        template <class T>
        static void init(std::span<T>, Rng&, InitKind) {}

        // Calls f(in_block, out_offset, m) for every output pixel of output rows [oy0, oy1): in_block(dy, dx)
        // is the offset of the window element's row block counted from input row oy0 * PH; a pixel's C
        // channels of n samples are one block of m = C n values.
        template <class F>
        static void for_each_window(std::size_t n, std::size_t oy0, std::size_t oy1, F&& f) {
            const std::size_t m = C * n;
            for (std::size_t oy = oy0; oy < oy1; ++oy)
                for (std::size_t ox = 0; ox < OW; ++ox)
                    f([=](std::size_t dy, std::size_t dx) { return (((oy - oy0) * PH + dy) * W + ox * PW + dx) * m; },
                      (oy * OW + ox) * m, m);
        }
        template <class F>
        static void for_each_window(std::size_t n, F&& f) {
            for_each_window(n, 0, OH, f);
        }

        template <class T>
        static void forward(const T*, const T* x, T* y, T*, std::size_t n) {
            for_each_window(n, [&](auto at, std::size_t out, std::size_t m) {
                auto run = [&]<class V>(std::size_t e) {
                    V best = simd::loadv<V>(x + at(0, 0) + e);
                    auto nan = simd::isnan(best);
                    for (std::size_t dy = 0; dy < PH; ++dy)
                        for (std::size_t dx = 0; dx < PW; ++dx)
                            if (dy || dx) {
                                const V v = simd::loadv<V>(x + at(dy, dx) + e);
                                nan = nan | simd::isnan(v);
                                best = simd::max(best, v);
                            }
                    simd::storev(y + out + e, simd::select(nan, V(std::numeric_limits<T>::quiet_NaN()), best));
                };
                std::size_t e = 0;
                if constexpr (simd::enabled)
                    for (const std::size_t e_end = m - m % simd::width<T>; e < e_end; e += simd::width<T>)
                        run.template operator()<simd::vec<T>>(e);
                for (; e < m; ++e) run.template operator()<T>(e);
            });
        }

        // The pullback by bands of input rows (layer.hpp's optional cotangent_rows): rows [r0, r1) of dx,
        // input row r at dx_rows + (r - r0) W C n; r0 a multiple of PH, r1 one too or H. A convolution's
        // pullback calls it band by band (chain.hpp), so that its cotangent never exists whole.
        static constexpr std::size_t cotangent_row_block = PH;
        template <class T>
        static void cotangent_rows(const T* x, const T* y, const T* dy, T* dx_rows, std::size_t r0, std::size_t r1,
                                   std::size_t n) {
            const std::size_t row = W * C * n;  // values per image row
            if constexpr (H % PH != 0 || W % PW != 0) std::fill_n(dx_rows, (r1 - r0) * row, T(0));
            const T* const x_rows = x + r0 * row;
            for_each_window(n, r0 / PH, std::min(r1 / PH, OH), [&](auto at, std::size_t out, std::size_t m) {
                auto run = [&]<class V>(std::size_t e) {
                    const V top = simd::loadv<V>(y + out + e);
                    V left = simd::loadv<V>(dy + out + e);  // the cotangent not yet passed on
                    for (std::size_t wy = 0; wy < PH; ++wy)
                        for (std::size_t wx = 0; wx < PW; ++wx) {
                            const V v = simd::loadv<V>(x_rows + at(wy, wx) + e);
                            const auto hit = (v == top) | simd::isnan(v);  // a NaN v: top is NaN too
                            simd::storev(dx_rows + at(wy, wx) + e, simd::select(hit, left, V(0)));
                            left = simd::select(hit, V(0), left);
                        }
                };
                std::size_t e = 0;
                if constexpr (simd::enabled)
                    for (const std::size_t e_end = m - m % simd::width<T>; e < e_end; e += simd::width<T>)
                        run.template operator()<simd::vec<T>>(e);
                for (; e < m; ++e) run.template operator()<T>(e);
            });
        }

        template <class T>
        static void pullback(const T*, T*, const T* x, const T* y, T*, T*, T* dy, T* dx, std::size_t n) {
            if (dx) cotangent_rows(x, y, static_cast<const T*>(dy), dx, 0, H, n);
        }

        // Where each output's maximum comes from: the first maximal position of its window (or the first NaN),
        // the one the pullback passes the cotangent to. f(in, out) for every window, channel and sample, with
        // in and out the offsets in x and y of a layout of n samples that holds `blocks` blocks of n values
        // per feature (the jet's columns, x's block 0 the values that choose; 1 for a plain batch), block 0.
        template <class T, class F>
        static void for_each_maximum(const T* x, std::size_t n, std::size_t blocks, F&& f) {
            for_each_window(blocks * n, [&](auto at, std::size_t out, std::size_t) {
                for (std::size_t ch = 0; ch < C; ++ch)
                    for (std::size_t s = 0; s < n; ++s) {
                        const std::size_t e = ch * blocks * n + s;
                        std::size_t best = at(0, 0);
                        T top = x[best + e];
                        for (std::size_t dy = 0; dy < PH; ++dy)
                            for (std::size_t dx = 0; dx < PW; ++dx) {
                                const T v = x[at(dy, dx) + e];
                                if (!std::isnan(top) && (std::isnan(v) || v > top)) best = at(dy, dx), top = v;
                            }
                        f(best + e, out + e);
                    }
            });
        }

        // The derivative passes' rules. Near x the layer is the linear map that picks each window's maximal
        // position, the same for every jet column and for R x: its jet takes every column from the
        // position the values (column 0) choose, its pullback passes each column's cotangent back there,
        // and its R-operator picks R x there (R of the pullback: R xbar from R ybar, the same way). Templates
        // of the layer they belong to, so that MaxPool1D, which derives from this layer, names its own.
        template <class Layer>
        struct jet_rule_for {
            using layer = Layer;
            static constexpr std::size_t saved = 0, scratch = 0;
            template <class T>
            static void forward(const T*, const T* x, T* y, T*, std::size_t m, const JetColumns& cols) {
                for_each_maximum(x, m, cols.C, [&](std::size_t in, std::size_t out) {
                    for (std::size_t c = 0; c < cols.C; ++c) y[out + c * m] = x[in + c * m];
                });
            }
            template <class T>
            static void pullback(const T*, T*, const T* x, const T*, T*, T* ybar, T* xbar, std::size_t m,
                                 const JetColumns& cols) {
                if (!xbar) return;
                std::fill_n(xbar, in_size * cols.C * m, T(0));
                for_each_maximum(x, m, cols.C, [&](std::size_t in, std::size_t out) {
                    for (std::size_t c = 0; c < cols.C; ++c) xbar[in + c * m] = ybar[out + c * m];
                });
            }
        };
        template <class Layer>
        struct hvp_rule_for {
            using layer = Layer;
            static constexpr std::size_t saved = 0, scratch = 0;
            template <class T>
            static void forward(const T*, const T*, const T* x, const T* rx, T* y, T* ry, T*, std::size_t m) {
                for_each_maximum(x, m, 1, [&](std::size_t in, std::size_t out) {
                    y[out] = x[in];
                    ry[out] = rx ? rx[in] : T(0);
                });
            }
            template <class T>
            static void pullback(const T*, const T*, T*, T*, const T* x, const T*, const T*, T*, T* ybar, T* rybar,
                                 T* xbar, T* rxbar, std::size_t m) {
                if (!xbar) return;
                std::fill_n(xbar, in_size * m, T(0));
                if (rxbar) std::fill_n(rxbar, in_size * m, T(0));
                for_each_maximum(x, m, 1, [&](std::size_t in, std::size_t out) {
                    xbar[in] = ybar[out];
                    if (rxbar) rxbar[in] = rybar[out];
                });
            }
        };

        using jet_rule = jet_rule_for<bound>;
        using hvp_rule = hvp_rule_for<bound>;

        static std::string describe() { return "MaxPool[" + std::to_string(PH) + "x" + std::to_string(PW) + "]"; }
        static void torch_layout(TorchModules& m, std::size_t) {
            m.skip_module();  // nn.MaxPool2d((PH, PW))
            m.natural_order();
        }
    };
};

}  // namespace chainlet
