// Hessian-vector products with respect to the parameters (for Newton-CG and other second-order
// optimisers), exact: Pearlmutter's R-operator, i.e. the directional derivative R{.} = d/de{.}(p + e v)
// carried through the forward pass and the pullback. SquaredError loss. The pass walks the chain by
// one rule per layer kind (detail::HvpRule, recursively through containers, as taylor.hpp does):
// Dense, ActivationLayer, Slice, Residual and Parallel (Concat, Sum, Product, Dot); any other layer
// fails to compile with one static_assert naming it, and so does a Dense or ActivationLayer whose
// activation has no jet (detail::checked_jet in taylor.hpp).
//
// Forward, layer l (z = W a + b, a' = f(z)), with v = (V, c) the direction of (W, b):
//   Rz = V a + c + W Ra (Ra = 0 at the input),   Ra' = f'(z) Rz
// Loss (mean over samples of sum_o (y_o - t_o)^2, scale = 1/n): abar = 2 scale (y - t),  R abar = 2 scale Ry.
// Pullback, layer l:
//   zbar = abar f'(z),          R zbar = R abar f'(z) + abar f''(z) Rz
//   gW += a zbar^T,             (Hv)_W += a R zbar^T + Ra zbar^T
//   gb += sum_s zbar,           (Hv)_b += sum_s R zbar
//   abar_prev = W^T zbar,       R abar_prev = V^T zbar + W^T R zbar
// ActivationLayer (y = f(x)):  Ry = f'(x) Rx;  xbar = ybar f'(x),  R xbar = R ybar f'(x) + ybar f''(x) Rx.
// Slice, Residual, Concat, Sum are linear: R goes through them as the value does (Ry = x's rule on Rx,
// R xbar = the pullback's rule on R ybar). A product y = A B (Product, one factor at a time; Dot
// summed over the features): Ry = RA B + A RB;  Abar = ybar B,  R Abar = R ybar B + ybar RB (B alike).
// Chunks and groups as in Workspace (workspace.hpp): the same bits on any thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "chainlet/checks.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "chainlet/losses.hpp"

namespace chainlet {

namespace detail {

// The R-operator rule of a bound layer B, for a chunk of m samples (buffers feature-major, f m + s):
//   saved, scratch   features of storage per sample
//   forward(p, v, x, rx, y, ry, saved, m)        y and Ry from x and Rx (rx null: Rx = 0)
//   pullback(p, v, g, hv, x, rx, saved, scratch, ybar, rybar, xbar, rxbar, m)
//                    g += the gradient, hv += its R-derivative; xbar, rxbar (both null or neither)
//                    overwritten; ybar and rybar may be clobbered.
template <class B>
struct HvpRule {  // the primary template: see TaylorRule's (taylor.hpp)
    static constexpr std::size_t saved = no_derivative_rule<B>(), scratch = 0;
    template <class T>
    static void forward(const T*, const T*, const T*, const T*, T*, T*, T*, std::size_t) {
        stand_in_ran();
    }
    template <class T>
    static void pullback(const T*, const T*, T*, T*, const T*, const T*, const T*, T*, T*, T*, T*, T*, std::size_t) {
        stand_in_ran();
    }
};

template <class LayerType, class B>
struct HvpRuleOf : HvpRule<LayerType> {};

template <class B>
    requires requires { typename B::layer_type; }
struct HvpRule<B> : HvpRuleOf<typename B::layer_type, B> {};

// Dense: the rules of the header comment. Saved: z and Rz.
template <TaylorDense B>
struct HvpRule<B> {
    static constexpr std::size_t In = B::in_size, Out = B::out_size;
    static constexpr std::size_t saved = 2 * Out, scratch = 0;
    using Act = jet_activation<typename B::activation, B>;

    template <class T>
    static void forward(const T* w, const T* vw, const T* x, const T* rx, T* a, T* ra, T* sv, std::size_t m) {
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

// A chain: saved holds a and Ra at every inner boundary (act_offset, then the same again for Ra), then
// every layer's saved block; scratch the ping-pong cotangents (bar 0, bar 1, R bar 0, R bar 1), then the
// largest layer scratch.
template <class InShape, class... Layers>
struct HvpRule<Sequence<InShape, Layers...>> {
    using S = Sequence<InShape, Layers...>;
    static constexpr std::size_t L = S::num_layers, W = S::max_inner_width;
    template <std::size_t I>
    using rule = HvpRule<typename S::template layer<I>>;
    static constexpr auto saved_offset = []<std::size_t... I>(std::index_sequence<I...>) {
        const std::array<std::size_t, L> own = {rule<I>::saved...};
        std::array<std::size_t, L + 1> o{};
        o[0] = 2 * S::inner_width_sum;
        for (std::size_t i = 0; i < L; ++i) o[i + 1] = o[i] + own[i];
        return o;
    }(std::make_index_sequence<L>{});
    static constexpr std::size_t saved = saved_offset[L];
    static constexpr std::size_t scratch = []<std::size_t... I>(std::index_sequence<I...>) {
        return 4 * W + std::max({rule<I>::scratch...});
    }(std::make_index_sequence<L>{});

    template <class T>
    static void forward(const T* p, const T* v, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (([&] {
                 const T* in = I == 0 ? x : sv + S::act_offset[I] * m;
                 const T* rin = I == 0 ? rx : sv + (S::inner_width_sum + S::act_offset[I]) * m;
                 T* out = I + 1 == L ? y : sv + S::act_offset[I + 1] * m;
                 T* rout = I + 1 == L ? ry : sv + (S::inner_width_sum + S::act_offset[I + 1]) * m;
                 rule<I>::forward(p + S::param_offset[I], v + S::param_offset[I], in, rin, out, rout,
                                  sv + saved_offset[I] * m, m);
             }()),
             ...);
        }(std::make_index_sequence<L>{});
    }
    template <class T>
    static void pullback(const T* p, const T* v, T* g, T* hv, const T* x, const T* rx, const T* sv, T* scr, T* ybar,
                         T* rybar, T* xbar, T* rxbar, std::size_t m) {
        [&]<std::size_t... R>(std::index_sequence<R...>) {
            (([&] {
                 constexpr std::size_t I = L - 1 - R;
                 const T* in = I == 0 ? x : sv + S::act_offset[I] * m;
                 const T* rin = I == 0 ? rx : sv + (S::inner_width_sum + S::act_offset[I]) * m;
                 T* yb = I == L - 1 ? ybar : scr + (I % 2) * W * m;
                 T* ryb = I == L - 1 ? rybar : scr + (2 + I % 2) * W * m;
                 T* xb = I == 0 ? xbar : scr + ((I + 1) % 2) * W * m;
                 T* rxb = I == 0 ? rxbar : scr + (2 + (I + 1) % 2) * W * m;
                 rule<I>::pullback(p + S::param_offset[I], v + S::param_offset[I], g + S::param_offset[I],
                                   hv + S::param_offset[I], in, rin, sv + saved_offset[I] * m, scr + 4 * W * m, yb,
                                   ryb, xb, rxb, m);
             }()),
             ...);
        }(std::make_index_sequence<L>{});
    }
};

// Residual: y = x + f(x), Ry = Rx + R f; xbar = ybar + J^T ybar (and R alike), the inner chain pulling
// back copies of ybar and R ybar. Scratch: those copies, then the inner scratch.
template <class... Layers, class B>
struct HvpRuleOf<Residual<Layers...>, B> {
    using inner = HvpRule<typename B::inner>;
    static constexpr std::size_t F = B::in_size;
    static constexpr std::size_t saved = inner::saved, scratch = 2 * F + inner::scratch;
    template <class T>
    static void forward(const T* p, const T* v, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        inner::forward(p, v, x, rx, y, ry, sv, m);
        kernels::add_to(y, x, F * m);
        if (rx) kernels::add_to(ry, rx, F * m);
    }
    template <class T>
    static void pullback(const T* p, const T* v, T* g, T* hv, const T* x, const T* rx, const T* sv, T* scr, T* ybar,
                         T* rybar, T* xbar, T* rxbar, std::size_t m) {
        if (!xbar) return inner::pullback(p, v, g, hv, x, rx, sv, scr + 2 * F * m, ybar, rybar, xbar, rxbar, m);
        std::copy_n(ybar, F * m, scr);
        std::copy_n(rybar, F * m, scr + F * m);
        inner::pullback(p, v, g, hv, x, rx, sv, scr + 2 * F * m, scr, scr + F * m, xbar, rxbar, m);
        kernels::add_to(xbar, static_cast<const T*>(ybar), F * m);
        kernels::add_to(rxbar, static_cast<const T*>(rybar), F * m);
    }
};

// Slice: y and Ry select (Rx = 0: Ry = 0); xbar and R xbar scatter.
template <std::size_t First, std::size_t Count, class B>
struct HvpRuleOf<Slice<First, Count>, B> {
    static constexpr std::size_t saved = 0, scratch = 0;
    template <class T>
    static void forward(const T*, const T*, const T* x, const T* rx, T* y, T* ry, T*, std::size_t m) {
        std::copy_n(x + First * m, Count * m, y);
        if (rx) std::copy_n(rx + First * m, Count * m, ry);
        else std::fill_n(ry, Count * m, T(0));
    }
    template <class T>
    static void pullback(const T*, const T*, T*, T*, const T*, const T*, const T*, T*, T* ybar, T* rybar, T* xbar,
                         T* rxbar, std::size_t m) {
        if (!xbar) return;
        for (auto [out, in] : {std::pair{xbar, ybar}, std::pair{rxbar, rybar}}) {
            std::fill_n(out, First * m, T(0));
            std::copy_n(in, Count * m, out + First * m);
            std::fill(out + (First + Count) * m, out + B::in_size * m, T(0));
        }
    }
};

// ActivationLayer: the rules of the header comment (f at the layer's input x).
template <Activation A, class B>
struct HvpRuleOf<ActivationLayer<A>, B> {
    static constexpr std::size_t F = B::in_size;
    static constexpr std::size_t saved = 0, scratch = 0;
    using Act = jet_activation<A, B>;
    template <class T>
    static void forward(const T*, const T*, const T* x, const T* rx, T* y, T* ry, T*, std::size_t m) {
        kernels::vectors_then_scalars<T>(F * m, [&]<class V>(std::size_t k) {
            const Jet<V> j = Act::jet(simd::loadv<V>(x + k));
            simd::storev(y + k, j.value);
            simd::storev(ry + k, rx ? j.d1 * simd::loadv<V>(rx + k) : V(0));
        });
    }
    template <class T>
    static void pullback(const T*, const T*, T*, T*, const T* x, const T* rx, const T*, T*, T* ybar, T* rybar,
                         T* xbar, T* rxbar, std::size_t m) {
        if (!xbar) return;
        kernels::vectors_then_scalars<T>(F * m, [&]<class V>(std::size_t k) {
            const Jet<V> j = Act::jet(simd::loadv<V>(x + k));
            const V ab = simd::loadv<V>(ybar + k), rab = simd::loadv<V>(rybar + k);
            simd::storev(xbar + k, ab * j.d1);
            simd::storev(rxbar + k, rx ? simd::fma(rab, j.d1, ab * j.d2 * simd::loadv<V>(rx + k)) : rab * j.d1);
        });
    }
};

// Parallel: as taylor.hpp's rule, with R. Saved: the branch outputs o_b, then their R o_b (not for
// Concat), the partial products P_1 .. P_{B-2} and their R (Product, Dot), the branches' saved blocks.
// Scratch: a branch's cotangent and its R (not for Concat), two Pbar buffers and their R (Product, Dot),
// a later branch's input cotangent and its R, the largest branch scratch.
template <class Combine, class... Branches, class B>
struct HvpRuleOf<Parallel<Combine, Branches...>, B> {
    static constexpr std::size_t NB = sizeof...(Branches);
    static constexpr bool concat = std::is_same_v<Combine, Concat>, dot = std::is_same_v<Combine, Dot>;
    static constexpr bool additive = std::is_same_v<Combine, Sum> || (std::is_same_v<Combine, Product> && NB == 1);
    static constexpr bool products = !concat && !additive;
    static constexpr std::size_t Fo = B::width[0], Wsum = B::out_offset[NB];
    template <std::size_t I>
    using rule = HvpRule<typename B::template branch<I>>;
    static constexpr std::size_t num_partials = products ? NB - 2 : 0;
    static constexpr std::size_t partials_offset = concat ? 0 : 2 * Wsum;
    static constexpr auto saved_offset = []<std::size_t... I>(std::index_sequence<I...>) {
        const std::array<std::size_t, NB> own = {rule<I>::saved...};
        std::array<std::size_t, NB + 1> o{};
        o[0] = partials_offset + 2 * num_partials * Fo;
        for (std::size_t i = 0; i < NB; ++i) o[i + 1] = o[i] + own[i];
        return o;
    }(std::make_index_sequence<NB>{});
    static constexpr std::size_t saved = saved_offset[NB];
    static constexpr std::size_t cotangent_size = concat ? 0 : products ? 6 * Fo : 2 * Fo;
    static constexpr std::size_t dx_size = NB > 1 ? 2 * B::in_size : 0;
    static constexpr std::size_t scratch = []<std::size_t... I>(std::index_sequence<I...>) {
        return cotangent_size + dx_size + std::max({rule<I>::scratch...});
    }(std::make_index_sequence<NB>{});

    // Branch b's output and its R (in y, ry for Concat).
    template <std::size_t I, class T>
    static T* out(T* y, T* sv, std::size_t m) {
        return concat ? y + B::out_offset[I] * m : sv + B::out_offset[I] * m;
    }
    template <std::size_t I, class T>
    static T* rout(T* ry, T* sv, std::size_t m) {
        return concat ? ry + B::out_offset[I] * m : sv + (Wsum + B::out_offset[I]) * m;
    }
    // P_b and R P_b (P_0 = o_0).
    template <class T>
    static T* partial(T* sv, std::size_t b, std::size_t m) {
        return b == 0 ? sv : sv + (partials_offset + 2 * (b - 1) * Fo) * m;
    }
    template <class T>
    static T* rpartial(T* sv, std::size_t b, std::size_t m) {
        return b == 0 ? sv + Wsum * m : sv + (partials_offset + (2 * (b - 1) + 1) * Fo) * m;
    }

    template <class T>
    static void forward(const T* p, const T* v, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (rule<I>::forward(p + B::param_offset[I], v + B::param_offset[I], x, rx, out<I>(y, sv, m), rout<I>(ry, sv, m),
                              sv + saved_offset[I] * m, m),
             ...);
        }(std::make_index_sequence<NB>{});
        const std::size_t len = Fo * m;
        if constexpr (concat) {
        } else if constexpr (additive) {
            std::copy_n(sv, len, y);
            std::copy_n(sv + Wsum * m, len, ry);
            for (std::size_t b = 1; b < NB; ++b) {
                kernels::add_to(y, static_cast<const T*>(sv + B::out_offset[b] * m), len);
                kernels::add_to(ry, static_cast<const T*>(sv + (Wsum + B::out_offset[b]) * m), len);
            }
        } else {
            if constexpr (dot) {
                std::fill_n(y, m, T(0));
                std::fill_n(ry, m, T(0));
            }
            for (std::size_t b = 1; b < NB; ++b) {
                const T *A = partial(sv, b - 1, m), *RA = rpartial(sv, b - 1, m);
                const T *Bo = sv + B::out_offset[b] * m, *RB = sv + (Wsum + B::out_offset[b]) * m;
                const bool last = b + 1 == NB;
                if (last && dot) {
                    for (std::size_t k = 0; k < Fo; ++k)
                        for (std::size_t s = 0; s < m; ++s) {
                            const std::size_t i = k * m + s;
                            y[s] += A[i] * Bo[i];
                            ry[s] += RA[i] * Bo[i] + A[i] * RB[i];
                        }
                } else {
                    T* P = last ? y : partial(sv, b, m);
                    T* RP = last ? ry : rpartial(sv, b, m);
                    for (std::size_t i = 0; i < len; ++i) {
                        const T a = A[i], ra = RA[i];  // P may not alias A, but read first anyway
                        P[i] = a * Bo[i];
                        RP[i] = ra * Bo[i] + a * RB[i];
                    }
                }
            }
        }
    }

    template <class T>
    static void pullback(const T* p, const T* v, T* g, T* hv, const T* x, const T* rx, const T* sv, T* scr, T* ybar,
                         T* rybar, T* xbar, T* rxbar, std::size_t m) {
        const std::size_t len = Fo * m;
        T* const c = scr;  // a branch's cotangent, then its R
        T* const pb[2] = {scr + 2 * len, scr + 4 * len};  // Pbar and R Pbar, ping-pong (Product, Dot)
        T* const bdx = scr + cotangent_size * m;
        T* const bscr = bdx + dx_size * m;
        T* const svm = const_cast<T*>(sv);  // read only
        [&]<std::size_t... R>(std::index_sequence<R...>) {
            (([&] {
                 constexpr std::size_t I = products ? NB - 1 - R : R;
                 T *dyb = c, *rdyb = c + len;
                 if constexpr (concat) {
                     dyb = ybar + B::out_offset[I] * m;
                     rdyb = rybar + B::out_offset[I] * m;
                 } else if constexpr (additive) {
                     std::copy_n(ybar, len, dyb);
                     std::copy_n(rybar, len, rdyb);
                 } else {
                     // Pbar_I and its R: ybar, rybar (Dot: one feature for every k) or the buffers written above
                     const T* Pb = I == NB - 1 ? ybar : pb[I % 2];
                     const T* RPb = I == NB - 1 ? rybar : pb[I % 2] + len;
                     const bool bcast = I == NB - 1 && dot;
                     if constexpr (I >= 1) {
                         const T *A = partial(svm, I - 1, m), *RA = rpartial(svm, I - 1, m);
                         const T *Bo = sv + B::out_offset[I] * m, *RB = sv + (Wsum + B::out_offset[I]) * m;
                         T *Ab = pb[(I - 1) % 2], *RAb = pb[(I - 1) % 2] + len;
                         for (std::size_t i = 0; i < len; ++i) {
                             const std::size_t j = bcast ? i % m : i;
                             dyb[i] = Pb[j] * A[i];                      // Bbar = Pbar A
                             rdyb[i] = RPb[j] * A[i] + Pb[j] * RA[i];    // R Bbar = R Pbar A + Pbar RA
                             Ab[i] = Pb[j] * Bo[i];                      // Abar = Pbar B
                             RAb[i] = RPb[j] * Bo[i] + Pb[j] * RB[i];    // R Abar = R Pbar B + Pbar RB
                         }
                     } else {
                         dyb = pb[0];
                         rdyb = pb[0] + len;
                     }
                 }
                 T* dxb = !xbar ? nullptr : R == 0 ? xbar : bdx;
                 T* rdxb = !xbar ? nullptr : R == 0 ? rxbar : bdx + B::in_size * m;
                 rule<I>::pullback(p + B::param_offset[I], v + B::param_offset[I], g + B::param_offset[I],
                                   hv + B::param_offset[I], x, rx, sv + saved_offset[I] * m, bscr, dyb, rdyb, dxb,
                                   rdxb, m);
                 if (xbar && R > 0) {
                     kernels::add_to(xbar, static_cast<const T*>(bdx), B::in_size * m);
                     kernels::add_to(rxbar, static_cast<const T*>(bdx + B::in_size * m), B::in_size * m);
                 }
             }()),
             ...);
        }(std::make_index_sequence<NB>{});
    }
};

}  // namespace detail

template <class Net, class T>
class HessianVectorWorkspace {
public:
    static constexpr std::size_t L = Net::num_layers;
    static constexpr std::size_t max_groups = 32;
    static constexpr std::size_t chunk = 128;

    using Rule = detail::HvpRule<typename Net::sequence>;

    explicit HessianVectorWorkspace(std::size_t batch, int threads = 0) { reserve(batch, threads); }

    static std::size_t num_chunks(std::size_t n) { return (n + chunk - 1) / chunk; }
    static std::size_t chunks_per_group(std::size_t n) { return (num_chunks(n) + max_groups - 1) / max_groups; }
    static std::size_t num_groups(std::size_t n) {
        const std::size_t per = std::max<std::size_t>(chunks_per_group(n), 1);
        return (num_chunks(n) + per - 1) / per;
    }

    void reserve(std::size_t batch, int threads = 0) {
        threads = resolve_threads(threads);
        if (scratch_.size() < static_cast<std::size_t>(threads)) scratch_.resize(static_cast<std::size_t>(threads));
        for (auto& s : scratch_) s.reserve();
        // Two partials (gradient, product) per slot of parallel_for_ordered, added into g and hv group by
        // group in order.
        const std::size_t groups = num_groups(batch), partials = ordered_slots(groups, threads);
        if (partial_.size() < 2 * partials * Net::num_params) partial_.resize(2 * partials * Net::num_params);
        if (losses_.size() < groups) losses_.resize(groups);
    }

    // The SquaredError loss of n samples (x: n rows of in_size, t: n rows of out_size, sample-major),
    // its gradient g and the Hessian-vector product hv = H v (both overwritten; either may be null).
    T hvp(const T* p, const T* v, T* g, T* hv, const T* x, const T* t, std::size_t n, SquaredError = {},
          int threads = 1) {
        threads = resolve_threads(threads);
        reserve(n, threads);
        constexpr std::size_t P = Net::num_params;
        const T scale = T(1) / static_cast<T>(n);
        const std::size_t chunks = num_chunks(n), per = chunks_per_group(n), groups = num_groups(n);
        if (g) std::fill_n(g, P, T(0));
        if (hv) std::fill_n(hv, P, T(0));
        auto partial = [&](std::size_t slot) { return partial_.data() + 2 * slot * P; };
        parallel_for_ordered(
            groups, threads,
            [&](std::size_t gi, int tid, std::size_t slot) {
                Scratch& s = scratch_[static_cast<std::size_t>(tid)];
                T* pg = partial(slot);
                T* ph = pg + P;
                std::fill_n(pg, 2 * P, T(0));
                T l = 0;
                for (std::size_t c = gi * per; c < std::min(chunks, (gi + 1) * per); ++c) {
                    const std::size_t s0 = c * chunk, m = std::min(chunk, n - s0);
                    kernels::gather_transpose(x + s0 * Net::in_size, Net::in_size, nullptr, m, s.x);
                    kernels::gather_transpose(t + s0 * Net::out_size, Net::out_size, nullptr, m, s.target);
                    l += chunk_hvp(p, v, pg, ph, s, m, scale);
                }
                losses_[gi] = l;
            },
            [&](std::size_t, std::size_t slot) {
                if (g) kernels::add_to(g, partial(slot), P);
                if (hv) kernels::add_to(hv, partial(slot) + P, P);
            });
        T total = 0;
        for (std::size_t i = 0; i < groups; ++i) total += losses_[i];
        return total * scale;
    }

    // The same on spans, sizes checked as value_and_gradient checks them: n is x's number of rows (a
    // positive whole number of in_size values), t holds n * out_size targets, p and v num_params values,
    // g and hv num_params or none (empty: not wanted).
    T hvp(std::span<const T> p, std::span<const T> v, std::span<T> g, std::span<T> hv, std::span<const T> x,
          std::span<const T> t, SquaredError loss = {}, int threads = 1) {
        constexpr const char* where = "HessianVectorWorkspace::hvp";
        detail::check_threads(where, threads);
        detail::expect_size(where, "the parameter buffer", Net::num_params, p.size());
        detail::expect_size(where, "the direction v", Net::num_params, v.size());
        if (!g.empty()) detail::expect_size(where, "the gradient buffer", Net::num_params, g.size());
        if (!hv.empty()) detail::expect_size(where, "the product buffer hv", Net::num_params, hv.size());
        const std::size_t n = detail::count_rows(where, x.size(), Net::in_size);
        detail::expect_size(where, "the target buffer", n * Net::out_size, t.size());
        return hvp(p.data(), v.data(), g.empty() ? nullptr : g.data(), hv.empty() ? nullptr : hv.data(), x.data(),
                   t.data(), n, loss, threads);
    }

private:
    struct Scratch {
        aligned_vector<T> buf;
        T *x = nullptr, *y = nullptr, *ry = nullptr, *ybar = nullptr, *rybar = nullptr, *target = nullptr;
        T *saved = nullptr, *work = nullptr;  // Rule::saved, Rule::scratch features x chunk

        void reserve() {
            if (!buf.empty()) return;
            constexpr std::size_t O = Net::out_size;
            const std::size_t sizes[] = {Net::in_size * chunk, O * chunk, O * chunk, O * chunk, O * chunk, O * chunk,
                                         Rule::saved * chunk, Rule::scratch * chunk};
            std::size_t total = 0;
            for (auto z : sizes) total += round_up16(z);
            buf.assign(total, T(0));
            T* q = buf.data();
            T** ptrs[] = {&x, &y, &ry, &ybar, &rybar, &target, &saved, &work};
            for (std::size_t i = 0; i < 8; ++i) {
                *ptrs[i] = q;
                q += round_up16(sizes[i]);
            }
        }
    };

    T chunk_hvp(const T* p, const T* v, T* g, T* hv, Scratch& s, std::size_t m, T scale) const {
        Rule::forward(p, v, static_cast<const T*>(s.x), static_cast<const T*>(nullptr), s.y, s.ry, s.saved, m);
        // the loss: abar = 2 scale (y - t), R abar = 2 scale Ry
        constexpr std::size_t O = Net::out_size;
        const T l = SquaredError::value_and_gradient<T>(s.y, s.target, s.ybar, O, m, scale);
        for (std::size_t k = 0; k < O * m; ++k) s.rybar[k] = T(2) * scale * s.ry[k];
        Rule::pullback(p, v, g, hv, static_cast<const T*>(s.x), static_cast<const T*>(nullptr),
                       static_cast<const T*>(s.saved), s.work, s.ybar, s.rybar, static_cast<T*>(nullptr),
                       static_cast<T*>(nullptr), m);
        return l;
    }

    std::vector<Scratch> scratch_;
    aligned_vector<T> partial_;
    std::vector<T> losses_;
};

}  // namespace chainlet
