// LSTM<H, ReturnSequence>: a long short-term memory over a sequence Input<T, F>, PyTorch's equations and
// gate order (i, f, g, o), both bias vectors, h_0 = c_0 = 0:
//   i_t = sigmoid(W_ii x_t + b_ii + W_hi h_{t-1} + b_hi)     f_t = sigmoid(... f rows ...)
//   g_t = tanh(W_ig x_t + b_ig + W_hg h_{t-1} + b_hg)        o_t = sigmoid(... o rows ...)
//   c_t = f_t c_{t-1} + i_t g_t,   h_t = o_t tanh(c_t)
// Output: h_T (shape H), or with ReturnSequence every h_t (shape (T, H), row-major per sample).
// Parameters: W_ih [f * 4H + g], W_hh [j * 4H + g], b_ih, b_hh (layers/recurrent.hpp gives the layout
// and its PyTorch names); initialised as PyTorch does, every parameter U(-1/sqrt(H), 1/sqrt(H)).
//
// Saved per step: i, f, g, o, c_t, h_t (6H per sample).
// Pullback (backpropagation through time), dh and dc the gradients reaching h_t and c_t:
//   do = dh tanh(c),  dc += dh o (1 - tanh(c)^2)
//   di = dc g,  dg = dc i,  df = dc c_{t-1},  dc_{t-1} = dc f
//   dG = (di i (1 - i), df f (1 - f), dg (1 - g^2), do o (1 - o))   (gradient of the pre-activations)
//   dW_ih += x_t dG^T,  dW_hh += h_{t-1} dG^T,  db_ih += dG,  db_hh += dG
//   dx_t = W_ih^T dG,   dh_{t-1} = W_hh^T dG
//
// PyTorch: nn.LSTM(F, H, batch_first=True) returns (output, (h_n, c_n)); the equivalent module returns
// output[:, -1] (the default) or output (ReturnSequence). Its state_dict names are weight_ih_l0 [4H, F],
// weight_hh_l0 [4H, H], bias_ih_l0 [4H], bias_hh_l0 [4H].
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "chainlet/init.hpp"
#include "chainlet/kernel_instances.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/kernels/gemm.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/layers/recurrent.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

template <std::size_t H, bool ReturnSequence = false>
struct LSTM {
    template <class InShape>
    struct bound {
        using shape_rule = detail::recurrent_shape<InShape, H, ReturnSequence>;
        static constexpr bool rejects_shape = shape_rule::rejects;
        static constexpr std::size_t steps = shape_rule::steps, features = shape_rule::features;
        static constexpr std::size_t G = 4 * H;  // gate rows i, f, g, o
        using params = detail::recurrent_params<features, H, G>;

        static constexpr std::size_t in_size = InShape::size;
        using out_shape = typename shape_rule::out_shape;
        static constexpr std::size_t out_size = out_shape::size;
        static constexpr std::size_t num_params = params::count;
        static constexpr std::size_t saved_per_step = 6 * H;  // i, f, g, o, c, h
        static constexpr std::size_t saved_per_sample = steps * saved_per_step;
        static constexpr std::size_t scratch_per_sample = G + 2 * H;  // dG, dh, dc

        template <class T>
        static void init(std::span<T> p, Rng& rng, InitKind) {
            params::init(p, rng);
        }

        template <class T>
        static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n) {
            using detail::gate_sigmoid, detail::gate_tanh, simd::loadv, simd::storev;
            const T* w_ih = p + params::w_ih;
            const T* w_hh = p + params::w_hh;
            const T* b_hh = p + params::b_hh;
            std::array<T, G> bias;  // b_ih + b_hh, summed once
            for (std::size_t k = 0; k < G; ++k) bias[k] = p[params::b_ih + k] + b_hh[k];
            for (std::size_t t = 0; t < steps; ++t) {
                T* gates = saved + t * saved_per_step * n;  // i, f, g, o rows, first their pre-activations
                T* c = gates + G * n;
                T* h = c + H * n;
                const T* c_prev = t ? c - saved_per_step * n : nullptr;
                const T* h_prev = t ? h - saved_per_step * n : nullptr;
                detail::project(G, n, features, w_ih, G, x + t * features * n, bias.data(), gates);
                if (h_prev) detail::project_add(G, n, H, w_hh, G, h_prev, gates);
                // The gates, elementwise over all H x n values (rows j, samples s alike).
                T* ig = gates;
                T* fg = ig + H * n;
                T* gg = fg + H * n;
                T* og = gg + H * n;
                kernels::vectors_then_scalars<T>(H * n, [&]<class V>(std::size_t k) {
                    const V iv = gate_sigmoid(loadv<V>(ig + k));
                    const V fv = gate_sigmoid(loadv<V>(fg + k));
                    const V gv = gate_tanh(loadv<V>(gg + k));
                    const V ov = gate_sigmoid(loadv<V>(og + k));
                    const V cpv = c_prev ? loadv<V>(c_prev + k) : V(T(0));
                    const V cv = simd::fma(fv, cpv, iv * gv);
                    storev(ig + k, iv);
                    storev(fg + k, fv);
                    storev(gg + k, gv);
                    storev(og + k, ov);
                    storev(c + k, cv);
                    storev(h + k, ov * gate_tanh(cv));
                });
                if constexpr (ReturnSequence) std::copy_n(h, H * n, y + t * H * n);
            }
            if constexpr (!ReturnSequence) std::copy_n(saved + (steps - 1) * saved_per_step * n + 5 * H * n, H * n, y);
        }

        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T*, T* saved, T* scratch, T* dy, T* dx,
                             std::size_t n) {
            using detail::gate_tanh, simd::loadv, simd::storev;
            const T* w_ih = p + params::w_ih;
            const T* w_hh = p + params::w_hh;
            T* dgates = scratch;
            T* dh = dgates + G * n;
            T* dc = dh + H * n;
            if constexpr (ReturnSequence)
                std::fill_n(dh, H * n, T(0));
            else
                std::copy_n(dy, H * n, dh);
            std::fill_n(dc, H * n, T(0));
            for (std::size_t t = steps; t-- > 0;) {
                const T* gates = saved + t * saved_per_step * n;
                const T* c = gates + G * n;
                const T* c_prev = t ? c - saved_per_step * n : nullptr;
                const T* h_prev = t ? c_prev + H * n : nullptr;
                if constexpr (ReturnSequence) kernels::add_to(dh, dy + t * H * n, H * n);
                const T* ig = gates;
                const T* fg = ig + H * n;
                const T* gg = fg + H * n;
                const T* og = gg + H * n;
                T* di = dgates;
                T* df = di + H * n;
                T* dg = df + H * n;
                T* dout = dg + H * n;
                kernels::vectors_then_scalars<T>(H * n, [&]<class V>(std::size_t k) {
                    const V dhv = loadv<V>(dh + k), iv = loadv<V>(ig + k), fv = loadv<V>(fg + k), gv = loadv<V>(gg + k),
                            ov = loadv<V>(og + k);
                    const V tc = gate_tanh(loadv<V>(c + k));
                    const V cpv = c_prev ? loadv<V>(c_prev + k) : V(T(0));
                    const V dcv = simd::fma(dhv * ov, simd::fnma(tc, tc, V(1)), loadv<V>(dc + k));
                    storev(di + k, dcv * gv * (iv - iv * iv));
                    storev(df + k, dcv * cpv * (fv - fv * fv));
                    storev(dg + k, dcv * iv * simd::fnma(gv, gv, V(1)));
                    storev(dout + k, dhv * tc * (ov - ov * ov));
                    storev(dc + k, dcv * fv);
                });
                kernels::row_sums_add(G, n, dgates, n, g + params::b_ih);
                kernels::row_sums_add(G, n, dgates, n, g + params::b_hh);
                detail::project_pullback(G, n, features, w_ih, G, x + t * features * n, dgates, g + params::w_ih,
                                         dx ? dx + t * features * n : nullptr);
                // dh_{t-1} = W_hh^T dG overwrites dh (h_t reaches the loss only through y and step t + 1)
                if (h_prev) detail::project_pullback(G, n, H, w_hh, G, h_prev, dgates, g + params::w_hh, dh);
            }
        }

        static std::string describe() {
            return "LSTM[" + std::to_string(H) + (ReturnSequence ? ",sequence" : "") + "]";
        }
        static void torch_layout(TorchModules& m, std::size_t offset) { params::torch_layout(m, offset); }
    };
};

}  // namespace chainlet
