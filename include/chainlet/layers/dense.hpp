// Dense<Out, Act, Bias>: y = act(W x + b) for a flat input of In features.
//
// Parameters, in this order: W stored input-major, W[i * Out + o] (the transpose of PyTorch's
// nn.Linear.weight), then b (Out values, absent without bias).
// Activations inside the chain are feature-major: x[i * n + s] for sample s of a chunk of n.
//
// Pullback, with dz = dy * act'(z):   dW += dz x^T,   db += sum_s dz,   dx = W^T dz.
//
// A chunk of one sample (the call inside an ODE right-hand side) takes another route: the vectors
// run along the features instead of the (single-sample) batch, so lanes stay full.
//
// PyTorch: nn.Linear(In, Out, bias=Bias) followed by the activation's module (none for Identity);
// Linear.weight[o][i] = W[i * Out + o].
//
// In the derivative passes (jet_rule, hvp_rule; layer.hpp), below the layer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

#include "chainlet/activations.hpp"
#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/kernel_instances.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/kernels/gemm.hpp"
#include "chainlet/kernels/vector_loop.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

namespace detail {
template <class B>
struct DenseJetRule;
template <class B>
struct DenseHvpRule;
}  // namespace detail

template <std::size_t Out, Activation Act = Identity, bool Bias = true>
struct Dense {
    using activation = Act;

    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(Out > 0, "Dense<Out>: Out must be positive");
            static_assert(Out == 0 || InShape::rank == 1,
                          "Dense needs a flat input: put chainlet::Flatten between a Conv/MaxPool layer and Dense");
            return Out == 0 || InShape::rank != 1;
        }();
        static constexpr std::size_t in_size = InShape::size;
        static constexpr std::size_t out_size = Out;
        using out_shape = Shape<Out>;
        static constexpr std::size_t num_weights = in_size * Out;
        static constexpr std::size_t num_params = num_weights + (Bias ? Out : 0);
        using layer_type = Dense;
        using activation = Act;
        static constexpr bool has_bias = Bias;
        using jet_rule = detail::DenseJetRule<bound>;  // the derivative passes' rules (below)
        using hvp_rule = detail::DenseHvpRule<bound>;
        // Saved: the pre-activation z, kept only when act' cannot be computed from y.
        // Scratch: dz transposed (the weight gradient of a small chunk, see pullback).
        static constexpr std::size_t saved_per_sample = Act::derivative_from_output ? 0 : Out;
        static constexpr std::size_t scratch_per_sample = Out;
        // Below this many samples the weight gradient runs along the outputs instead of the samples.
        static constexpr std::size_t outer_product_below = 4 * simd::width<float>;

        template <class T>
        static void init(std::span<T> p, Rng& rng, InitKind kind) {
            fill_glorot(p.first(num_weights), static_cast<double>(in_size + Out), rng, kind);
            std::fill(p.begin() + num_weights, p.end(), T(0));
        }

        template <class T>
        static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n) {
            if constexpr (fuses_into_product<Act>) {
                fused_forward<Act>(p, x, y, Act::derivative_from_output ? nullptr : saved, n);
            } else {
                // z = b + W x, then y = act(z) in a pass of its own (activations.hpp, fuses_into_product)
                T* z = Act::derivative_from_output ? y : saved;
                fused_forward<Identity>(p, x, z, static_cast<T*>(nullptr), n);
                kernels::vectors_then_scalars<T>(Out * n, [&]<class V>(std::size_t i) {
                    simd::storev(y + i, Act::value(simd::loadv<V>(z + i)));
                });
            }
        }

        // y = E(b + W x) for the epilogue E, z = b + W x where z is not null.
        template <class E, class T>
        static void fused_forward(const T* p, const T* x, T* y, T* z, std::size_t n) {
            using namespace kernels;
            const T* w = p;
            if (n == 1) {
                if constexpr (Bias) {
                    gemv_t_fixed<E, Out, in_size>(x, w, p + num_weights, y, z);
                } else {
                    // gemv_t starts from a bias; without one, one row of gemm_nn (no benchmark runs it)
                    gemm_nn<E, Init::zero>(1, Out, in_size, x, 0, 1, w, Out, y, Out, nullptr, z);
                }
            } else {
                // Y (Out x n) = act(b + W X), W(o, i) = w[i * Out + o]; a few inputs as a reduction of
                // fixed length (its own tile shape, see kernels::short_reduction)
                if constexpr (Bias && in_size <= short_reduction)
                    gemm_nn_fixed_k<in_size, E, Init::row_bias>(Out, n, w, unit_stride, Out, x, n, y, n,
                                                                  p + num_weights, z);
                else if constexpr (Bias)
                    gemm_nn<E, Init::row_bias>(Out, n, in_size, w, unit_stride, Out, x, n, y, n, p + num_weights, z);
                else
                    gemm_nn<E, Init::zero>(Out, n, in_size, w, unit_stride, Out, x, n, y, n, nullptr, z);
            }
        }

        // dy is overwritten with dz, except on the one-pass route without an input gradient, which leaves it
        // as it was (layer.hpp allows either). dx may be null (no input gradient wanted, e.g. the first layer).
        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                             std::size_t n) {
            using namespace kernels;
            const T* s = Act::derivative_from_output ? y : saved;
            if (n == 1) return pullback_one<true>(p, g, x, s, dy, dx);
            const T* w = p;
            T* gw = g;
            if constexpr (in_size <= 4) {
                if (n >= outer_product_below) {
                    // A layer of 1-4 inputs (the first layer of an MLP on a few coordinates): dz, dW and
                    // db in one pass, dz kept only for an input gradient.
                    gemm_nt_activation<Act, in_size>(Out, n, x, n, dy, s, n, gw, Out, Bias ? g + num_weights : nullptr,
                                                     dx != nullptr);
                    if (dx) gemm_nn<NoEpilogue, Init::zero>(in_size, n, Out, w, Out, 1, dy, n, dx, n);
                    return;
                }
            }
            if constexpr (in_size > 4 && Out > 4) {
                if (n >= outer_product_below) {
                    // dz, db and the rows of dW of the first 4 inputs in one pass that stores dz (not for Identity,
                    // whose dz is dy), then the other rows of dW from dz: dW is gemm_nt's bit for bit, and the
                    // pass that made dz and db alone (one more read of dy and s) is gone.
                    gemm_nt_activation<Act, 4>(Out, n, x, n, dy, s, n, gw, Out, Bias ? g + num_weights : nullptr,
                                               !std::is_same_v<Act, Identity>);
                    gemm_nt(in_size - 4, Out, n, x + 4 * n, n, dy, n, gw + 4 * Out, Out);
                    if (dx) gemm_nn<NoEpilogue, Init::zero>(in_size, n, Out, w, Out, 1, dy, n, dx, n);
                    return;
                }
            }
            // dz, and db += the sums of dz's rows
            if constexpr (Bias)
                activation_pullback_row_sums<Act>(Out, n, dy, s, n, g + num_weights);
            else
                activation_pullback<Act>(dy, s, Out * n);
            if constexpr (Out <= 4) {
                if (n >= outer_product_below) {
                    // 1-4 outputs (the last layer of an MLP): dW and dX in one pass over dz
                    gemm_nt_nn_few<Out>(in_size, n, x, n, dy, n, w, gw, Out, dx, n);
                    return;
                }
            }
            if (n < outer_product_below && Out >= simd::width<T> / 2) {
                // A few samples: dW (In x Out) += X dz^T as a sum of outer products, vectorised
                // along Out with dz transposed to n x Out (short dot products along the samples
                // would each end in a horizontal sum).
                T* dzt = scratch;
                scatter_transpose(dy, Out, n, dzt);
                gemm_nn<NoEpilogue, Init::accumulate>(in_size, Out, n, x, static_cast<std::ptrdiff_t>(n), 1, dzt,
                                                    Out, gw, Out);
            } else {
                // dW[i, o] += sum_s x[i, s] dz[o, s]
                gemm_nt(in_size, Out, n, x, n, dy, n, gw, Out);
            }
            // dX (In x n) = W^T dZ, W^T(i, o) = w[i * Out + o]
            if (dx) gemm_nn<NoEpilogue, Init::zero>(in_size, n, Out, w, Out, 1, dy, n, dx, n);
        }

        // The same with g written, not added to (layer.hpp): one sample writes its outer product, a chunk
        // zeroes g and adds.
        template <class T>
        static void pullback_assign(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                                    std::size_t n) {
            if (n == 1) return pullback_one<false>(p, g, x, Act::derivative_from_output ? y : saved, dy, dx);
            detail::zero_then_pullback<bound>(p, g, x, y, saved, scratch, dy, dx, n);
        }

        // One sample, vectorised along the features: dz = dy * act'(s) (into dy), dW (In x Out) += or = x dz^T,
        // db += or = dz, dx[i] = sum_o w[i * Out + o] dz[o].
        template <bool accumulate, class T>
        static void pullback_one(const T* w, T* g, const T* x, const T* s, T* dy, T* dx) {
            using namespace kernels;
            activation_pullback<Act>(dy, s, Out);
            outer_product<accumulate>(in_size, Out, x, dy, g, Out);
            if constexpr (Bias) {
                // db (+)= 1 dz^T, the same vector loop (std::copy_n called memmove for these few bytes)
                const T one(1);
                outer_product<accumulate>(1, Out, &one, dy, g + num_weights, Out);
            }
            if (dx) gemv_rows(in_size, Out, w, Out, dy, dx);
        }

        static std::string describe() {
            return "Dense[" + std::to_string(Out) + "," + Act::name + (Bias ? "" : ",nobias") + "]";
        }
        static void torch_layout(TorchModules& m, std::size_t offset) {
            const std::string name = m.next_module();
            TorchTensor weight{name + ".weight", {Out, in_size}, std::vector<std::size_t>(Out * in_size)};
            for (std::size_t o = 0; o < Out; ++o)
                for (std::size_t j = 0; j < in_size; ++j)
                    weight.source[o * in_size + j] = offset + m.input_feature(j) * Out + o;
            m.add(std::move(weight));
            if constexpr (Bias) {
                TorchTensor bias{name + ".bias", {Out}, std::vector<std::size_t>(Out)};
                for (std::size_t o = 0; o < Out; ++o) bias.source[o] = offset + num_weights + o;
                m.add(std::move(bias));
            }
            m.natural_order();
            m.activation(Act::name);
        }
    };
};

namespace detail {

// Input derivatives (jet.hpp's columns): z_c = W a_c for every column c, plus b in column 0, then the
// activation's rule on the columns (ActivationJetRule). Pullback: zbar from ybar by that rule, then
//   Wbar += sum over every column of zbar_c a_c^T,  bbar += sum_s zbar_0,  abar_c = W^T zbar_c.
// Saved: z (Out features; column 0 holds y instead where the activation has output_jet).
template <class B>
struct DenseJetRule {
    using layer = B;
    static constexpr std::size_t In = B::in_size, Out = B::out_size;
    static constexpr std::size_t saved = Out, scratch = 0;
    // (layer.hpp) false without a jet: a pass fails to compile then (checked_jet)
    static constexpr bool available = JetActivation<typename B::activation>;

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* z, std::size_t m, const JetColumns& cols) {
        using Act = jet_activation<typename B::activation, B>;
        const std::size_t N = cols.C * m;
        kernels::gemm_nn<Identity, kernels::Init::zero>(Out, N, In, p, kernels::unit_stride, Out, x, N, z, N);
        const T* bias = B::has_bias ? p + B::num_weights : nullptr;
        ActivationJetRule<Act, T>::template forward<true>(z, y, Out, m, cols.D, cols.second, bias);
    }
    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* z, T*, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        using Act = jet_activation<typename B::activation, B>;
        const std::size_t N = cols.C * m;
        constexpr bool saved_output = ActivationJetRule<Act, T>::from_output;
        ActivationJetRule<Act, T>::template pullback<saved_output>(z, ybar, Out, m, cols.D, cols.second, cols.containing);  // ybar -> zbar
        // Wbar[i, o] += sum over every column of a[i, .] zbar[o, .]
        kernels::gemm_nt(In, Out, N, x, N, ybar, N, g, Out);
        if constexpr (B::has_bias) kernels::row_sums_add(Out, m, ybar, N, g + B::num_weights);
        if (xbar) kernels::gemm_nn<Identity, kernels::Init::zero>(In, N, Out, p, Out, 1, ybar, N, xbar, N);
    }
};

// The R-operator (derivatives/hvp.hpp), z = W a + b, y = f(z), v = (V, c) the direction of (W, b):
//   Rz = V a + c + W Ra (Ra = 0 at the input),   Ry = f'(z) Rz
// Pullback:
//   zbar = ybar f'(z),          R zbar = R ybar f'(z) + ybar f''(z) Rz
//   gW += a zbar^T,             (Hv)_W += a R zbar^T + Ra zbar^T
//   gb += sum_s zbar,           (Hv)_b += sum_s R zbar
//   abar = W^T zbar,            R abar = V^T zbar + W^T R zbar
// Saved: z and Rz.
template <class B>
struct DenseHvpRule {
    using layer = B;
    static constexpr std::size_t In = B::in_size, Out = B::out_size;
    static constexpr std::size_t saved = 2 * Out, scratch = 0;
    // (layer.hpp) false without a jet: a pass fails to compile then (checked_jet)
    static constexpr bool available = JetActivation<typename B::activation>;

    template <class T>
    static void forward(const T* w, const T* vw, const T* x, const T* rx, T* a, T* ra, T* sv, std::size_t m) {
        using Act = jet_activation<typename B::activation, B>;
        using kernels::Init;
        using kernels::unit_stride;
        T *z = sv, *rz = sv + Out * m;
        if constexpr (B::has_bias) {
            kernels::gemm_nn<Identity, Init::row_bias>(Out, m, In, w, unit_stride, Out, x, m, z, m, w + B::num_weights);
            kernels::gemm_nn<Identity, Init::row_bias>(Out, m, In, vw, unit_stride, Out, x, m, rz, m, vw + B::num_weights);
        } else {
            kernels::gemm_nn<Identity, Init::zero>(Out, m, In, w, unit_stride, Out, x, m, z, m);
            kernels::gemm_nn<Identity, Init::zero>(Out, m, In, vw, unit_stride, Out, x, m, rz, m);
        }
        if (rx) kernels::gemm_nn<kernels::NoEpilogue, Init::accumulate>(Out, m, In, w, unit_stride, Out, rx, m, rz, m);
        kernels::vectors_then_scalars<T>(Out * m, [&]<class V>(std::size_t k) {
            const Jet<V> j = Act::jet(simd::loadv<V>(z + k));
            simd::storev(a + k, j.value);
            simd::storev(ra + k, j.d1 * simd::loadv<V>(rz + k));
        });
    }
    template <class T>
    static void pullback(const T* w, const T* vw, T* gw, T* hw, const T* x, const T* rx, const T* sv, T*, T* zbar,
                         T* rzbar, T* prev, T* rprev, std::size_t m) {
        using Act = jet_activation<typename B::activation, B>;
        using kernels::Init;
        const T *z = sv, *rz = sv + Out * m;
        kernels::vectors_then_scalars<T>(Out * m, [&]<class V>(std::size_t k) {
            const Jet<V> j = Act::jet(simd::loadv<V>(z + k));
            const V ab = simd::loadv<V>(zbar + k), rab = simd::loadv<V>(rzbar + k);
            simd::storev(zbar + k, ab * j.d1);
            simd::storev(rzbar + k, simd::fma(rab, j.d1, ab * j.d2 * simd::loadv<V>(rz + k)));
        });
        kernels::gemm_nt(In, Out, m, x, m, zbar, m, gw, Out);
        kernels::gemm_nt(In, Out, m, x, m, rzbar, m, hw, Out);
        if (rx) kernels::gemm_nt(In, Out, m, rx, m, zbar, m, hw, Out);
        if constexpr (B::has_bias) {
            kernels::row_sums_add(Out, m, zbar, m, gw + B::num_weights);
            kernels::row_sums_add(Out, m, rzbar, m, hw + B::num_weights);
        }
        if (prev) {
            kernels::gemm_nn<Identity, Init::zero>(In, m, Out, w, Out, 1, zbar, m, prev, m);
            kernels::gemm_nn<Identity, Init::zero>(In, m, Out, vw, Out, 1, zbar, m, rprev, m);
            kernels::gemm_nn<kernels::NoEpilogue, Init::accumulate>(In, m, Out, w, Out, 1, rzbar, m, rprev, m);
        }
    }
};

}  // namespace detail

// Dense without a bias term: y = act(W x).
template <std::size_t Out, Activation Act = Identity>
using DenseNoBias = Dense<Out, Act, false>;

}  // namespace chainlet
