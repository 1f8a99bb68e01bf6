// The derivative passes' rules (layer.hpp's jet_rule and hvp_rule) of the convolutions: Conv, its strided
// form and Conv1D, whose bound layers share these as they share their implementations
// (layers/conv_strided.hpp). A convolution is z = W * a + b (a correlation: linear in a and in W, the bias
// b per output channel, the last index of an output feature), y = act(z).
//
// What the rules ask of the bound layer B, besides the layer contract:
//   identity_twin                     the same bound layer with Act = Identity: its pullback gives
//                                     W's and b's gradients of a dz (and W^T dz); its saved holds the padded
//                                     input alone (its saved_per_sample values per sample)
//   forward_linear(w, a, z, saved, n)     z = W * a: no bias, no activation; writes the twin's saved
//   input_cotangent(w, dz, da, scratch, n)   da = W^T dz (overwritten); scratch: the twin's scratch
//
// Input derivatives (jet.hpp's columns, a chunk of C m "samples"): z_c = W * a_c in every column, plus b
// in column 0; then the activation's rule on the columns (ActivationJetRule). Pullback: zbar from ybar by
// that rule, then
//   Wbar += sum over every column of corr(a_c, zbar_c),  bbar += the channel sums of zbar_0 alone,
//   abar_c = W^T zbar_c.
// The R-operator (derivatives/hvp.hpp), (V, c) the direction of (W, b), Ra that of the input (0 at the
// chain's input):
//   Rz = V * a + c + W * Ra,   Ry = f'(z) Rz
// Pullback:
//   zbar = ybar f'(z),                      R zbar = R ybar f'(z) + ybar f''(z) Rz
//   gW += corr(a, zbar), gb += sums zbar,   (Hv)_W += corr(a, R zbar) + corr(Ra, zbar), (Hv)_b += sums R zbar
//   abar = W^T zbar,                        R abar = V^T zbar + W^T R zbar
// The bias terms that must stay out (column > 0, corr(Ra, zbar)) come from the twin's pullback, which adds
// every sum: the bias gradient is kept before that call and put back after it, so nothing is subtracted.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

#include "chainlet/activations.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/kernels/vector_loop.hpp"

namespace chainlet::detail {

// z[f * ld + s] += b[f % OC] for the features f of a chunk's `count` first samples (ld: the feature stride).
template <class T>
void add_channel_bias(T* z, std::size_t features, std::size_t OC, const T* b, std::size_t ld, std::size_t count) {
    for (std::size_t f = 0; f < features; ++f) {
        T* row = z + f * ld;
        const T bias = b[f % OC];
        kernels::vectors_then_scalars<T>(count, [&]<class V>(std::size_t s) {
            simd::storev(row + s, simd::loadv<V>(row + s) + V(bias));
        });
    }
}

// The twin's pullback of dz for the weight gradient alone (no input cotangent) into gw, with its bias sums
// into the bias gradient only when with_bias. y = dz: the Identity twin reads no output.
template <class B, class T>
void conv_weight_gradient(const T* w, T* gw, const T* a, T* saved, T* scratch, T* dz, std::size_t n, bool with_bias) {
    using Twin = typename B::identity_twin;
    constexpr std::size_t OC = B::num_params - B::num_weights;
    std::array<T, OC> kept{};
    if (!with_bias) std::copy_n(gw + B::num_weights, OC, kept.begin());
    Twin::pullback(w, gw, a, static_cast<const T*>(dz), saved, scratch, dz, static_cast<T*>(nullptr), n);
    if (!with_bias) std::copy_n(kept.begin(), OC, gw + B::num_weights);
}

template <class B>
struct ConvJetRule {
    using layer = B;
    using Twin = typename B::identity_twin;
    static constexpr std::size_t Out = B::out_size, OC = B::num_params - B::num_weights;
    static constexpr std::size_t linear_saved = Twin::saved_per_sample;
    // Saved (per sample and column): the padded input, then z (column 0: y where the activation has an
    // output jet). Scratch: the twin's pullback's.
    static constexpr std::size_t saved = linear_saved + Out, scratch = Twin::scratch_per_sample;
    static constexpr bool available = JetActivation<typename B::activation>;

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        using Act = jet_activation<typename B::activation, B>;
        const std::size_t N = cols.C * m;
        T* z = sv + linear_saved * N;
        B::forward_linear(p, x, z, sv, N);
        add_channel_bias(z, Out, OC, p + B::num_weights, N, m);
        ActivationJetRule<Act, T>::template forward<true>(z, y, Out, m, cols.D, cols.second,
                                                          static_cast<const T*>(nullptr));
    }
    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* sv, T* scr, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        using Act = jet_activation<typename B::activation, B>;
        const std::size_t N = cols.C * m;
        T* const svm = const_cast<T*>(sv);  // read only (layer.hpp: a pullback leaves saved as it is)
        constexpr bool saved_output = ActivationJetRule<Act, T>::from_output;
        ActivationJetRule<Act, T>::template pullback<saved_output>(svm + linear_saved * N, ybar, Out, m, cols.D,
                                                                  cols.second, cols.containing);  // ybar -> zbar
        // bbar: column 0's channel sums, taken before the twin's pullback (which may clobber zbar)
        std::array<T, OC> bias_sums{};
        for (std::size_t f = 0; f < Out; ++f)
            for (std::size_t s = 0; s < m; ++s) bias_sums[f % OC] += ybar[f * N + s];
        if (xbar) B::input_cotangent(p, static_cast<const T*>(ybar), xbar, scr, N);
        conv_weight_gradient<B>(p, g, x, svm, scr, ybar, N, false);
        for (std::size_t oc = 0; oc < OC; ++oc) g[B::num_weights + oc] += bias_sums[oc];
    }
};

template <class B>
struct ConvHvpRule {
    using layer = B;
    using Twin = typename B::identity_twin;
    static constexpr std::size_t In = B::in_size, Out = B::out_size, OC = B::num_params - B::num_weights;
    static constexpr std::size_t linear_saved = Twin::saved_per_sample;
    // Saved: the padded a, the padded Ra, z, Rz. Scratch: the twin's, then a copy of zbar and an input's
    // cotangent.
    static constexpr std::size_t saved = 2 * linear_saved + 2 * Out;
    static constexpr std::size_t scratch = Twin::scratch_per_sample + Out + In;
    static constexpr bool available = JetActivation<typename B::activation>;

    template <class T>
    static void forward(const T* w, const T* vw, const T* x, const T* rx, T* a, T* ra, T* sv, std::size_t m) {
        using Act = jet_activation<typename B::activation, B>;
        T *sv_x = sv, *sv_rx = sv + linear_saved * m, *z = sv + 2 * linear_saved * m, *rz = z + Out * m;
        B::forward_linear(w, x, z, sv_x, m);
        add_channel_bias(z, Out, OC, w + B::num_weights, m, m);
        B::forward_linear(vw, x, rz, sv_x, m);
        add_channel_bias(rz, Out, OC, vw + B::num_weights, m, m);
        if (rx) {
            B::forward_linear(w, rx, ra, sv_rx, m);  // W * Ra, through ra
            kernels::add_to(rz, static_cast<const T*>(ra), Out * m);
        }
        kernels::vectors_then_scalars<T>(Out * m, [&]<class V>(std::size_t k) {
            const Jet<V> j = Act::jet(simd::loadv<V>(z + k));
            simd::storev(a + k, j.value);
            simd::storev(ra + k, j.d1 * simd::loadv<V>(rz + k));
        });
    }
    template <class T>
    static void pullback(const T* w, const T* vw, T* gw, T* hw, const T* x, const T* rx, const T* sv, T* scr, T* zbar,
                         T* rzbar, T* prev, T* rprev, std::size_t m) {
        using Act = jet_activation<typename B::activation, B>;
        T* const svm = const_cast<T*>(sv);  // read only (layer.hpp: a pullback leaves saved as it is)
        T *sv_x = svm, *sv_rx = svm + linear_saved * m;
        const T *z = sv + 2 * linear_saved * m, *rz = z + Out * m;
        T *zbar_copy = scr + Twin::scratch_per_sample * m, *cotangent = zbar_copy + Out * m;
        kernels::vectors_then_scalars<T>(Out * m, [&]<class V>(std::size_t k) {
            const Jet<V> j = Act::jet(simd::loadv<V>(z + k));
            const V ab = simd::loadv<V>(zbar + k), rab = simd::loadv<V>(rzbar + k);
            simd::storev(zbar + k, ab * j.d1);
            simd::storev(rzbar + k, simd::fma(rab, j.d1, ab * j.d2 * simd::loadv<V>(rz + k)));
        });
        if (prev) {
            B::input_cotangent(w, static_cast<const T*>(rzbar), rprev, scr, m);
            B::input_cotangent(vw, static_cast<const T*>(zbar), cotangent, scr, m);
            kernels::add_to(rprev, static_cast<const T*>(cotangent), In * m);
            B::input_cotangent(w, static_cast<const T*>(zbar), prev, scr, m);
        }
        if (rx) {
            std::copy_n(zbar, Out * m, zbar_copy);
            conv_weight_gradient<B>(w, hw, rx, sv_rx, scr, zbar_copy, m, false);
        }
        conv_weight_gradient<B>(w, hw, x, sv_x, scr, rzbar, m, true);
        conv_weight_gradient<B>(w, gw, x, sv_x, scr, zbar, m, true);
    }
};

}  // namespace chainlet::detail
