// GRU<H, ReturnSequence>: a gated recurrent unit over a sequence Input<T, F>, PyTorch's equations and gate
// order (r, z, n), both bias vectors, h_0 = 0:
//   r_t = sigmoid(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
//   z_t = sigmoid(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
//   n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))
//   h_t = (1 - z_t) * n_t + z_t * h_{t-1}
// Output: h_T (shape H), or with ReturnSequence every h_t (shape (T, H), row-major per sample).
// Parameters: W_ih [f * 3H + g], W_hh [j * 3H + g], b_ih, b_hh (layers/recurrent.hpp gives the layout
// and its PyTorch names); initialised as PyTorch does, every parameter U(-1/sqrt(H), 1/sqrt(H)).
//
// Saved per step: r, z, n, a = W_hn h_{t-1} + b_hn, h_t (5H per sample).
// Pullback (backpropagation through time), dh the gradient reaching h_t (from y and from step t + 1):
//   dn = dh (1 - z),  dz = dh (h_{t-1} - n),  dn' = dn (1 - n^2)      (n' the pre-activation)
//   dr' = dn' a r (1 - r),  dz' = dz z (1 - z),  da = dn' r
//   input side  dG_i = (dr', dz', dn'):      dW_ih += x_t dG_i^T, db_ih += dG_i,  dx_t = W_ih^T dG_i
//   hidden side dG_h = (dr', dz', da):       dW_hh += h_{t-1} dG_h^T, db_hh += dG_h
//   dh_{t-1} = dh z + W_hh^T dG_h
//
// PyTorch: nn.GRU(F, H, batch_first=True) returns (output, h_n); the equivalent module returns
// output[:, -1] (the default) or output (ReturnSequence). Its state_dict names are weight_ih_l0 [3H, F],
// weight_hh_l0 [3H, H], bias_ih_l0 [3H], bias_hh_l0 [3H].
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
#include "chainlet/memory.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

template <std::size_t H, bool ReturnSequence = false>
struct GRU {
    template <class InShape>
    struct bound {
        using shape_rule = detail::recurrent_shape<InShape, H, ReturnSequence>;
        static constexpr bool rejects_shape = shape_rule::rejects;
        static constexpr std::size_t steps = shape_rule::steps, features = shape_rule::features;
        static constexpr std::size_t G = 3 * H;  // gate rows r, z, n
        using params = detail::recurrent_params<features, H, G>;

        static constexpr std::size_t in_size = InShape::size;
        using out_shape = typename shape_rule::out_shape;
        static constexpr std::size_t out_size = out_shape::size;
        static constexpr std::size_t num_params = params::count;
        static constexpr std::size_t saved_per_step = 5 * H;  // r, z, n, a, h
        static constexpr std::size_t saved_per_sample = steps * saved_per_step;
        static constexpr std::size_t scratch_per_sample = 2 * G + H;  // dG_i, dG_h, dh

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
            // Bias of the gate rows: b_ih + b_hh for r and z (summed once here), b_in for n (b_hn sits inside r * (...)).
            // G entries used; room for whole vectors: gemv_t reads bias in vectors only where they fit in G,
            // but g++ 12 (-Warray-bounds) could not see that for G = 3 (GRU<1>) in double.
            std::array<T, round_up16(G)> bias;
            for (std::size_t k = 0; k < G; ++k) bias[k] = p[params::b_ih + k] + (k < 2 * H ? b_hh[k] : T(0));
            for (std::size_t t = 0; t < steps; ++t) {
                T* gates = saved + t * saved_per_step * n;  // r, z, n rows, first their pre-activations
                T* a = gates + G * n;
                T* h = a + H * n;
                const T* h_prev = t ? h - saved_per_step * n : nullptr;
                detail::project(G, n, features, w_ih, G, x + t * features * n, bias.data(), gates);
                if (h_prev) {
                    detail::project_add(2 * H, n, H, w_hh, G, h_prev, gates);
                    detail::project(H, n, H, w_hh + 2 * H, G, h_prev, b_hh + 2 * H, a);
                } else {
                    for (std::size_t j = 0; j < H; ++j) std::fill_n(a + j * n, n, b_hh[2 * H + j]);
                }
                // The gates, elementwise over all H x n values (rows j, samples s alike).
                T* r = gates;
                T* z = r + H * n;
                T* nt = z + H * n;
                kernels::vectors_then_scalars<T>(H * n, [&]<class V>(std::size_t i) {
                    const V rv = gate_sigmoid(loadv<V>(r + i));
                    const V zv = gate_sigmoid(loadv<V>(z + i));
                    const V nv = gate_tanh(simd::fma(rv, loadv<V>(a + i), loadv<V>(nt + i)));
                    const V hpv = h_prev ? loadv<V>(h_prev + i) : V(T(0));
                    storev(r + i, rv);
                    storev(z + i, zv);
                    storev(nt + i, nv);
                    storev(h + i, simd::fma(zv, hpv - nv, nv));
                });
                if constexpr (ReturnSequence) std::copy_n(h, H * n, y + t * H * n);
            }
            if constexpr (!ReturnSequence) std::copy_n(saved + (steps - 1) * saved_per_step * n + 4 * H * n, H * n, y);
        }

        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T*, T* saved, T* scratch, T* dy, T* dx,
                             std::size_t n) {
            using kernels::vectors_then_scalars, simd::loadv, simd::storev;
            const T* w_ih = p + params::w_ih;
            const T* w_hh = p + params::w_hh;
            T* dgi = scratch;
            T* dgh = dgi + G * n;
            T* dh = dgh + G * n;
            if constexpr (ReturnSequence)
                std::fill_n(dh, H * n, T(0));
            else
                std::copy_n(dy, H * n, dh);
            for (std::size_t t = steps; t-- > 0;) {
                const T* gates = saved + t * saved_per_step * n;
                const T* a = gates + G * n;
                const T* h_prev = t ? gates - saved_per_step * n + 4 * H * n : nullptr;
                if constexpr (ReturnSequence) kernels::add_to(dh, dy + t * H * n, H * n);
                const T* r = gates;
                const T* z = r + H * n;
                const T* nt = z + H * n;
                T* dr = dgi;
                T* dz = dr + H * n;
                T* dn = dz + H * n;
                T* dr_h = dgh;
                T* dz_h = dr_h + H * n;
                T* da = dz_h + H * n;
                vectors_then_scalars<T>(H * n, [&]<class V>(std::size_t i) {
                    const V dhv = loadv<V>(dh + i), rv = loadv<V>(r + i), zv = loadv<V>(z + i), nv = loadv<V>(nt + i);
                    const V hpv = h_prev ? loadv<V>(h_prev + i) : V(T(0));
                    const V dn_pre = dhv * (V(1) - zv) * simd::fnma(nv, nv, V(1));
                    const V dr_pre = dn_pre * loadv<V>(a + i) * (rv - rv * rv);
                    const V dz_pre = dhv * (hpv - nv) * (zv - zv * zv);
                    storev(dr + i, dr_pre);
                    storev(dz + i, dz_pre);
                    storev(dn + i, dn_pre);
                    storev(dr_h + i, dr_pre);
                    storev(dz_h + i, dz_pre);
                    storev(da + i, dn_pre * rv);
                    storev(dh + i, dhv * zv);
                });
                kernels::row_sums_add(G, n, dgi, n, g + params::b_ih);
                kernels::row_sums_add(G, n, dgh, n, g + params::b_hh);
                detail::project_pullback(G, n, features, w_ih, G, x + t * features * n, dgi, g + params::w_ih,
                                         dx ? dx + t * features * n : nullptr);
                if (h_prev) {
                    kernels::gemm_nt(H, G, n, h_prev, n, dgh, n, g + params::w_hh, G);
                    kernels::gemm_nn<kernels::NoEpilogue, kernels::Init::accumulate>(H, n, G, w_hh, static_cast<std::ptrdiff_t>(G),
                                                                          1, dgh, n, dh, n);
                }
            }
        }

        static std::string describe() {
            return "GRU[" + std::to_string(H) + (ReturnSequence ? ",sequence" : "") + "]";
        }
        static void torch_layout(TorchModules& m, std::size_t offset) { params::torch_layout(m, offset); }
    };
};

}  // namespace chainlet
