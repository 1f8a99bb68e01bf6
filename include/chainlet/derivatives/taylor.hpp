// Input derivatives of a network in one forward pass, and the pullback of a loss of them to the
// parameters (physics-informed training). No tape: every layer's rule is written out.
//
// For a chunk of n samples the pass carries C = 1 + D + K columns per feature (feature-major,
// element [f][c][s] at f * C n + c n + s, so one matrix product moves all columns of a layer):
//   column 0          the value a
//   columns 1 .. D    tangents a_i = da/dt_i (the input derivatives d/dx_i, or the caller's directions)
//   columns 1+D+k     second derivatives a_S = sum_{i in S_k} d2a/dt_i^2 (S_k = {i}: a Hessian diagonal
//                     entry; S_k = all: the Laplacian)
// Through Dense<N, Act> (z = W a + b, y = f(z)):
//   z = W a + b,  z_i = W a_i,  z_S = W a_S
//   y = f(z),     y_i = f'(z) z_i,  y_S = f''(z) sum_{i in S} z_i^2 + f'(z) z_S
// Pullback (the reverse of those rules, needs f'''), from the cotangents ybar of every column:
//   zbar   = ybar f' + sum_i ybar_i f'' z_i + sum_S ybar_S (f''' sum_{i in S} z_i^2 + f'' z_S)
//   zbar_i = ybar_i f' + sum_{S contains i} 2 ybar_S f'' z_i
//   zbar_S = ybar_S f'
//   Wbar += zbar_all a_all^T (every column),  bbar += sum_s zbar,  abar = W^T zbar (every column).
// The pass walks the chain layer by layer, each layer kind by its own jet rule (detail::TaylorRule
// below, recursively through containers): Dense (above), ActivationLayer (Dense's activation rule with
// z = x), Slice (every column selects), Residual (every column adds), Parallel with Concat (columns
// concatenate), Sum (columns add), Product and Dot (Leibniz, one factor at a time:
//   y = a b,  y_i = a_i b + a b_i,  y_S = a_S b + 2 sum_{i in S} a_i b_i + a b_S).
// Any other layer (convolutions, pooling, normalisation, recurrent, Dropout ...) fails to compile with
// one static_assert; the "required from" line names it. So does a Dense or ActivationLayer whose
// activation has no jet (a user's activation may leave it out: detail::checked_jet), with its own message.
//
// Where the rules live: here, not in the layers' headers. A layer header holds the whole layer for
// training (forward, pullback, metadata); the jet rules belong to this pass, need its column layout and
// the activations' third derivatives, and a layer header including derivatives/ would make a lower
// header include a higher one. So the layers only expose what the rules read (Dense: activation and
// bias; the containers and ActivationLayer and Slice: `layer_type`, the layer's own type, which picks
// the rule by partial specialisation; the containers' inner chains and offsets were public already).
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "chainlet/activations.hpp"
#include "chainlet/chain.hpp"
#include "chainlet/checks.hpp"
#include "chainlet/containers/parallel.hpp"
#include "chainlet/containers/residual.hpp"
#include "chainlet/kernel_instances.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/kernels/gemm.hpp"
#include "chainlet/kernels/vector_loop.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/layers/activation.hpp"
#include "chainlet/layers/slice.hpp"
#include "chainlet/memory.hpp"
#include "chainlet/parallel.hpp"

namespace chainlet {

// A bound Dense layer, which the input-derivative pass and the Hessian-vector product go through (it
// exposes its activation and bias).
template <class L>
concept TaylorDense = requires {
    typename L::activation;
    { L::has_bias } -> std::convertible_to<bool>;
    { L::num_weights } -> std::convertible_to<std::size_t>;
};

// An activation with a jet (its value and first three derivatives, activations.hpp), which both passes
// need in a Dense or an ActivationLayer. Every built-in activation has one; the Activation concept does
// not ask for it, so a user's activation may have none (and then stays out of these two passes).
template <class Act>
concept JetActivation = requires { { Act::template jet<double>(0.0) }; };

namespace detail {
// The activation the Dense and ActivationLayer rules of both passes compute with: Act, or, where Act has
// no jet, Identity after the assertion has said so, which then stays the only error. Layer (the bound
// layer) makes it one assertion per layer type, named in the "In instantiation of" line; the "required
// from" lines after it name the pass that needed it first. A function, not a class: see no_derivative_rule.
template <class Act, class Layer>
constexpr bool checked_jet() {
    static_assert(JetActivation<Act>,
                  "chainlet: the input-derivative pass (derivatives/taylor.hpp) and the parameter Hessian-vector "
                  "product (derivatives/hvp.hpp) need an activation with a jet (Act::jet: the value and three "
                  "derivatives), which every built-in activation has; the Dense or ActivationLayer named as Layer "
                  "in checked_jet<Act, Layer> uses one without it");
    return JetActivation<Act>;
}
template <class Act, class Layer>
using jet_activation = std::conditional_t<checked_jet<Act, Layer>(), Act, Identity>;
}  // namespace detail

// Which derivatives the pass carries. tangents: D, the number of tangent columns (for input derivatives,
// the input size: tangent i is d/dx_i). second[k]: the tangent indices whose pure second derivatives
// column k sums.
struct DerivativeSpec {
    std::size_t tangents = 0;
    std::vector<std::vector<std::size_t>> second;

    // u, grad u and the Laplacian sum_i d2u/dx_i^2 for an input of `dims` coordinates.
    static DerivativeSpec laplacian(std::size_t dims) {
        DerivativeSpec s{dims, {{}}};
        for (std::size_t i = 0; i < dims; ++i) s.second[0].push_back(i);
        return s;
    }
    // u, grad u and d2u/dx_c^2 for each listed coordinate c (in that order).
    static DerivativeSpec diagonal(std::size_t dims, std::vector<std::size_t> coords) {
        DerivativeSpec s{dims, {}};
        for (auto c : coords) s.second.push_back({c});
        return s;
    }
    // u and grad u only.
    static DerivativeSpec gradient(std::size_t dims) { return {dims, {}}; }
    // u only (e.g. a boundary condition on the value).
    static DerivativeSpec value() { return {0, {}}; }

    std::size_t columns() const { return 1 + tangents + second.size(); }
};

// What a residual functor reads for a chunk of n samples (all feature-major, sample s at [.. * n + s]).
template <class T>
struct PointDerivatives {
    std::size_t n = 0, first_sample = 0, dims = 0, outputs = 0, tangents = 0, num_second = 0;
    const T* x = nullptr;    // dims x n: the inputs
    const T* jet = nullptr;  // outputs x C x n
    std::size_t columns() const { return 1 + tangents + num_second; }
    const T* u(std::size_t o = 0) const { return jet + o * columns() * n; }
    const T* du(std::size_t i, std::size_t o = 0) const { return jet + (o * columns() + 1 + i) * n; }
    const T* d2u(std::size_t k, std::size_t o = 0) const { return jet + (o * columns() + 1 + tangents + k) * n; }
    const T* coord(std::size_t i) const { return x + i * n; }
};

// Where a residual functor writes the cotangents of its loss (zeroed before the call; same layout).
template <class T>
struct PointCotangents {
    std::size_t n = 0, outputs = 0, tangents = 0, num_second = 0;
    T* jet = nullptr;
    std::size_t columns() const { return 1 + tangents + num_second; }
    T* u(std::size_t o = 0) const { return jet + o * columns() * n; }
    T* du(std::size_t i, std::size_t o = 0) const { return jet + (o * columns() + 1 + i) * n; }
    T* d2u(std::size_t k, std::size_t o = 0) const { return jet + (o * columns() + 1 + tangents + k) * n; }
};

// A residual: T operator()(const PointDerivatives<T>&, PointCotangents<T>&, T scale) const returning the
// sum over the chunk of its per-sample loss and adding scale * d(sum)/d(u, du, d2u) into the cotangents.
template <class R, class T>
concept ResidualFunctor = requires(const R& r, const PointDerivatives<T>& d, PointCotangents<T>& c, T scale) {
    { r(d, c, scale) } -> std::convertible_to<T>;
};

// The squared residual of a linear PDE for a network with one output:
//   r = a u + sum_i b_i du/dx_i + sum_k c_k (second column k) - source(x),   loss = mean r^2.
// Poisson -Lap u = f with DerivativeSpec::laplacian: {.second = {1}, .source = -f};
// heat u_t = alpha u_xx with x = (x, t) and DerivativeSpec::diagonal(2, {0}): {.first = {0, 1}, .second = {-alpha}}.
// source(const T* x, std::size_t sample) -> T: x the sample's coordinates, sample its index in the
// whole call (so a source known only at the points can be a table lookup).
template <class T, class Source>
struct LinearResidual {
    T value = T(0);
    std::vector<T> first;   // b_i (empty: none)
    std::vector<T> second;  // c_k (empty: none)
    Source source;

    T operator()(const PointDerivatives<T>& d, PointCotangents<T>& c, T scale) const {
        T sum = 0;
        T point[16];
        if (d.dims > 16)
            throw std::invalid_argument("LinearResidual: at most 16 input coordinates, the network has " +
                                        std::to_string(d.dims) + "; write the residual as a functor (docs/api.md)");
        for (std::size_t s = 0; s < d.n; ++s) {
            for (std::size_t i = 0; i < d.dims; ++i) point[i] = d.x[i * d.n + s];
            T r = value * d.u()[s] - source(static_cast<const T*>(point), d.first_sample + s);
            for (std::size_t i = 0; i < first.size(); ++i) r += first[i] * d.du(i)[s];
            for (std::size_t k = 0; k < second.size(); ++k) r += second[k] * d.d2u(k)[s];
            sum += r * r;
            const T dr = T(2) * scale * r;
            c.u()[s] += value * dr;
            for (std::size_t i = 0; i < first.size(); ++i) c.du(i)[s] += first[i] * dr;
            for (std::size_t k = 0; k < second.size(); ++k) c.d2u(k)[s] += second[k] * dr;
        }
        return sum;
    }
};
// linear_residual<double>({b_0, b_1}, {c_0}, source, a): the LinearResidual above.
template <class T, class Source>
LinearResidual<T, Source> linear_residual(std::vector<T> first, std::vector<T> second, Source source, T value = T(0)) {
    return {value, std::move(first), std::move(second), std::move(source)};
}

namespace detail {

// The Dense rules of the header comment on one layer. z, y, zbar: Out x C x n.
// An activation with `output_jet` (its derivatives are functions of y = f(z): identity, ReLU, tanh,
// sigmoid) lets the pullback read the jet from y: Dense's forward then stores y's value column over z's
// column 0 (`in_place`), so the pullback evaluates no f again (tanh: a quarter of the PINN pullback).
template <class Act>
concept HasOutputJet = requires { Act::template output_jet<double>(0.0); };

template <class Act, class T>
struct DenseJetRule {
    static constexpr bool from_output = HasOutputJet<Act>;
    // y and its columns from z (z holds W a in every column). in_place (Dense): bias (if any) is added to
    // column 0 first, and with from_output column 0 of z receives y's value for the pullback. Otherwise
    // (ActivationLayer: z is the layer's input) z is read only.
    template <bool in_place>
    static void forward(std::conditional_t<in_place, T*, const T*> z, T* y, std::size_t out, std::size_t n,
                        std::size_t D, const std::vector<std::vector<std::size_t>>& second, const T* bias = nullptr) {
        const std::size_t C = 1 + D + second.size(), stride = C * n;
        for (std::size_t o = 0; o < out; ++o) {
            auto zo = z + o * stride;
            T* yo = y + o * stride;
            kernels::vectors_then_scalars<T>(n, [&]<class V>(std::size_t s) {
                V z0 = simd::loadv<V>(zo + s);
                if constexpr (in_place)
                    if (bias) z0 += V(bias[o]);
                const Jet<V> j = Act::jet(z0);
                simd::storev(yo + s, j.value);
                if constexpr (in_place) simd::storev(zo + s, from_output ? j.value : z0);
                for (std::size_t i = 0; i < D; ++i) simd::storev(yo + (1 + i) * n + s, j.d1 * simd::loadv<V>(zo + (1 + i) * n + s));
                for (std::size_t k = 0; k < second.size(); ++k) {
                    V sq(0);
                    for (auto i : second[k]) {
                        const V zi = simd::loadv<V>(zo + (1 + i) * n + s);
                        sq = simd::fma(zi, zi, sq);
                    }
                    const std::size_t c = (1 + D + k) * n + s;
                    simd::storev(yo + c, simd::fma(j.d2, sq, j.d1 * simd::loadv<V>(zo + c)));
                }
            });
        }
    }
    // ybar (in place) becomes zbar. saved_output: column 0 of z holds y (the in_place forward of an
    // activation with output_jet).
    // containing[i]: the second-derivative columns k whose set holds tangent i.
    template <bool saved_output>
    static void pullback(const T* z, T* ybar, std::size_t out, std::size_t n, std::size_t D,
                         const std::vector<std::vector<std::size_t>>& second,
                         const std::vector<std::vector<std::size_t>>& containing) {
        const std::size_t C = 1 + D + second.size(), stride = C * n, K = second.size();
        for (std::size_t o = 0; o < out; ++o) {
            const T* zo = z + o * stride;
            T* bo = ybar + o * stride;
            kernels::vectors_then_scalars<T>(n, [&]<class V>(std::size_t s) {
                const Jet<V> j = [&] {
                    if constexpr (saved_output) return Act::output_jet(simd::loadv<V>(zo + s));
                    else return Act::jet(simd::loadv<V>(zo + s));
                }();
                V z0bar = simd::loadv<V>(bo + s) * j.d1;
                for (std::size_t i = 0; i < D; ++i)
                    z0bar = simd::fma(simd::loadv<V>(bo + (1 + i) * n + s) * j.d2, simd::loadv<V>(zo + (1 + i) * n + s), z0bar);
                for (std::size_t k = 0; k < K; ++k) {
                    const std::size_t c = (1 + D + k) * n + s;
                    V sq(0);
                    for (auto i : second[k]) {
                        const V zi = simd::loadv<V>(zo + (1 + i) * n + s);
                        sq = simd::fma(zi, zi, sq);
                    }
                    z0bar = simd::fma(simd::loadv<V>(bo + c), simd::fma(j.d3, sq, j.d2 * simd::loadv<V>(zo + c)), z0bar);
                }
                // zbar_i = ybar_i f' + 2 f'' z_i sum_{S_k contains i} ybar_S
                for (std::size_t i = 0; i < D; ++i) {
                    V w(0);
                    for (auto k : containing[i]) w += simd::loadv<V>(bo + (1 + D + k) * n + s);
                    const std::size_t c = (1 + i) * n + s;
                    simd::storev(bo + c, simd::fma(simd::loadv<V>(bo + c), j.d1,
                                                   V(2) * j.d2 * w * simd::loadv<V>(zo + c)));
                }
                for (std::size_t k = 0; k < K; ++k) {
                    const std::size_t c = (1 + D + k) * n + s;
                    simd::storev(bo + c, simd::loadv<V>(bo + c) * j.d1);
                }
                simd::storev(bo + s, z0bar);
            });
        }
    }
};


// What every rule reads about the columns: D tangents, the second-derivative sets, C = 1 + D + K columns,
// and containing[i] (the second-derivative columns whose set holds tangent i).
struct JetColumns {
    std::size_t D = 0, C = 1;
    const std::vector<std::vector<std::size_t>>& second;
    const std::vector<std::vector<std::size_t>>& containing;
};

// The primary TaylorRule's and HvpRule's assertion (a layer without a rule; both passes go through the
// same layers). A stand-in (layer.hpp's broken_layer) passes: its chain's error has been reported. It
// sits in a function that the rules' `saved` calls: clang, unlike g++, marks a class whose own
// static_assert failed as invalid, and every constant computed from its members then fails too (a
// cascade of errors after the one that matters).
template <class B>
constexpr std::size_t no_derivative_rule() {
    static_assert(is_broken_layer<B>,
                  "chainlet: the input-derivative pass (derivatives/taylor.hpp) and the parameter Hessian-vector "
                  "product (derivatives/hvp.hpp) go through Dense, ActivationLayer, Slice, Residual and Parallel "
                  "(Concat, Sum, Product, Dot) only; the layer in the \"required from\" line is not one of them");
    return 0;
}

// The jet rule of a bound layer B (the pass walks a chain by these, recursively through containers):
//   saved, scratch   features of storage per sample the rule needs (each feature C x m values)
//   forward(p, x, y, saved, m, cols)                    y's columns from x's, for a chunk of m samples
//   pullback(p, g, x, saved, scratch, ybar, xbar, m, cols)
//                                                       g += the parameter cotangent, xbar = the input
//                                                       cotangent (may be null); ybar may be clobbered
// All buffers are feature-major with the columns inside a feature: [f][c][s] at f C m + c m + s.
// A layer without a rule meets the static_assert of the primary template (the compiler's "required
// from" line names it); its stub members keep that the only error. Only a stand-in passes the
// assertion, and its stubs throw as its forward does (layer.hpp).
template <class B>
struct TaylorRule {
    static constexpr std::size_t saved = no_derivative_rule<B>(), scratch = 0;
    template <class T>
    static void forward(const T*, const T*, T*, T*, std::size_t, const JetColumns&) {
        stand_in_ran();
    }
    template <class T>
    static void pullback(const T*, T*, const T*, const T*, T*, T*, T*, std::size_t, const JetColumns&) {
        stand_in_ran();
    }
};

// The rule of a layer that names its type (B::layer_type): Residual, Parallel, Slice, ActivationLayer.
// Primary: a layer type without a rule.
template <class LayerType, class B>
struct TaylorRuleOf : TaylorRule<LayerType> {};

template <class B>
    requires requires { typename B::layer_type; }
struct TaylorRule<B> : TaylorRuleOf<typename B::layer_type, B> {};

// Dense: the rules of the header comment. Saved: z (Out features; column 0 holds y instead where the
// activation has output_jet, see DenseJetRule). The bias enters column 0 only.
template <TaylorDense B>
struct TaylorRule<B> {
    static constexpr std::size_t In = B::in_size, Out = B::out_size;
    static constexpr std::size_t saved = Out, scratch = 0;
    using Act = jet_activation<typename B::activation, B>;

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* z, std::size_t m, const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        kernels::gemm_nn<Identity, kernels::Init::zero>(Out, N, In, p, kernels::unit_stride, Out, x, N, z, N);
        const T* bias = B::has_bias ? p + B::num_weights : nullptr;
        DenseJetRule<Act, T>::template forward<true>(z, y, Out, m, cols.D, cols.second, bias);
    }
    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* z, T*, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        constexpr bool saved_output = DenseJetRule<Act, T>::from_output;
        DenseJetRule<Act, T>::template pullback<saved_output>(z, ybar, Out, m, cols.D, cols.second, cols.containing);  // ybar -> zbar
        // Wbar[i, o] += sum over every column of a[i, .] zbar[o, .]
        kernels::gemm_nt(In, Out, N, x, N, ybar, N, g, Out);
        if constexpr (B::has_bias) kernels::row_sums_add(Out, m, ybar, N, g + B::num_weights);
        if (xbar) kernels::gemm_nn<Identity, kernels::Init::zero>(In, N, Out, p, Out, 1, ybar, N, xbar, N);
    }
};

// A chain (and a Residual's inner chain, a Parallel's branch): the layers one after the other, as
// detail::Sequence does it. Saved: the inner activations (act_offset), then every layer's saved block.
// Scratch: two ping-pong cotangent buffers, then the largest layer scratch.
template <class InShape, class... Layers>
struct TaylorRule<Sequence<InShape, Layers...>> {
    using S = Sequence<InShape, Layers...>;
    static constexpr std::size_t L = S::num_layers;
    template <std::size_t I>
    using rule = TaylorRule<typename S::template layer<I>>;
    static constexpr auto saved_offset = []<std::size_t... I>(std::index_sequence<I...>) {
        const std::array<std::size_t, L> own = {rule<I>::saved...};
        std::array<std::size_t, L + 1> o{};
        o[0] = S::inner_width_sum;
        for (std::size_t i = 0; i < L; ++i) o[i + 1] = o[i] + own[i];
        return o;
    }(std::make_index_sequence<L>{});
    static constexpr std::size_t saved = saved_offset[L];
    static constexpr std::size_t scratch = []<std::size_t... I>(std::index_sequence<I...>) {
        return S::layer_scratch_offset + std::max({rule<I>::scratch...});
    }(std::make_index_sequence<L>{});

    template <std::size_t I, class T>
    static const T* input(const T* x, T* sv, std::size_t N) {
        if constexpr (I == 0) return x;
        else return sv + S::act_offset[I] * N;
    }
    template <std::size_t I, class T>
    static T* output(T* y, T* sv, std::size_t N) {
        if constexpr (I + 1 == L) return y;
        else return sv + S::act_offset[I + 1] * N;
    }

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (rule<I>::forward(p + S::param_offset[I], input<I>(x, sv, N), output<I>(y, sv, N), sv + saved_offset[I] * N,
                              m, cols),
             ...);
        }(std::make_index_sequence<L>{});
    }
    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* sv, T* scr, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        const std::size_t N = cols.C * m, W = S::max_inner_width;
        T* const sv_mut = const_cast<T*>(sv);  // read only; input/output take the forward's pointer types
        [&]<std::size_t... R>(std::index_sequence<R...>) {
            (([&] {
                 constexpr std::size_t I = L - 1 - R;
                 T* yb = I == L - 1 ? ybar : scr + (I % 2) * W * N;
                 T* xb = I == 0 ? xbar : scr + ((I - 1) % 2) * W * N;
                 rule<I>::pullback(p + S::param_offset[I], g + S::param_offset[I], input<I>(x, sv_mut, N),
                                   sv + saved_offset[I] * N, scr + S::layer_scratch_offset * N, yb, xb, m, cols);
             }()),
             ...);
        }(std::make_index_sequence<L>{});
    }
};

// Residual, y = x + f(x): every column adds, y_c = x_c + f(x)_c. Pullback: xbar = ybar + J_f^T ybar (the
// inner chain's pullback of a copy of ybar, which it clobbers). Scratch: that copy, then the inner scratch.
template <class... Layers, class B>
struct TaylorRuleOf<Residual<Layers...>, B> {
    using inner = TaylorRule<typename B::inner>;
    static constexpr std::size_t F = B::in_size;
    static constexpr std::size_t saved = inner::saved, scratch = F + inner::scratch;

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        inner::forward(p, x, y, sv, m, cols);
        kernels::add_to(y, x, F * cols.C * m);
    }
    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* sv, T* scr, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        if (!xbar) return inner::pullback(p, g, x, sv, scr + F * N, ybar, static_cast<T*>(nullptr), m, cols);
        std::copy_n(ybar, F * N, scr);
        inner::pullback(p, g, x, sv, scr + F * N, scr, xbar, m, cols);
        kernels::add_to(xbar, static_cast<const T*>(ybar), F * N);
    }
};

// Slice<First, Count>: every column selects features First .. First + Count - 1 (one block, as the
// columns sit inside a feature). Pullback: ybar scattered into those features of xbar, 0 elsewhere.
template <std::size_t First, std::size_t Count, class B>
struct TaylorRuleOf<Slice<First, Count>, B> {
    static constexpr std::size_t saved = 0, scratch = 0;
    template <class T>
    static void forward(const T*, const T* x, T* y, T*, std::size_t m, const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        std::copy_n(x + First * N, Count * N, y);
    }
    template <class T>
    static void pullback(const T*, T*, const T*, const T*, T*, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        if (!xbar) return;
        const std::size_t N = cols.C * m;
        std::fill_n(xbar, First * N, T(0));
        std::copy_n(ybar, Count * N, xbar + First * N);
        std::fill(xbar + (First + Count) * N, xbar + B::in_size * N, T(0));
    }
};

// ActivationLayer<A>: Dense's activation rule with z = x (the layer's input, kept by the caller).
// Pullback: xbar = the activation rule's pullback of ybar (computed in xbar); nothing without xbar.
template <Activation A, class B>
struct TaylorRuleOf<ActivationLayer<A>, B> {
    static constexpr std::size_t F = B::in_size;
    static constexpr std::size_t saved = 0, scratch = 0;
    using Act = jet_activation<A, B>;
    template <class T>
    static void forward(const T*, const T* x, T* y, T*, std::size_t m, const JetColumns& cols) {
        DenseJetRule<Act, T>::template forward<false>(x, y, F, m, cols.D, cols.second);
    }
    template <class T>
    static void pullback(const T*, T*, const T* x, const T*, T*, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        if (!xbar) return;
        std::copy_n(ybar, F * cols.C * m, xbar);
        DenseJetRule<Act, T>::template pullback<false>(x, xbar, F, m, cols.D, cols.second, cols.containing);
    }
};

// The product of two jets (one feature, C x m values each), Leibniz:
//   y = a b,   y_i = a_i b + a b_i,   y_S = a_S b + 2 sum_{i in S} a_i b_i + a b_S.
// Accumulate: y += instead of y = (Dot sums the features' products).
template <bool Accumulate, class T>
void jet_product(const T* a, const T* b, T* y, std::size_t m, const JetColumns& cols) {
    const std::size_t D = cols.D, K = cols.second.size();
    kernels::vectors_then_scalars<T>(m, [&]<class V>(std::size_t s) {
        auto ld = [&](const T* q, std::size_t c) { return simd::loadv<V>(q + c * m + s); };
        auto put = [&](std::size_t c, V v) {
            if constexpr (Accumulate) v += simd::loadv<V>(y + c * m + s);
            simd::storev(y + c * m + s, v);
        };
        const V a0 = ld(a, 0), b0 = ld(b, 0);
        for (std::size_t k = 0; k < K; ++k) {
            V cross(0);
            for (auto i : cols.second[k]) cross = simd::fma(ld(a, 1 + i), ld(b, 1 + i), cross);
            const std::size_t c = 1 + D + k;
            put(c, simd::fma(ld(a, c), b0, simd::fma(a0, ld(b, c), V(2) * cross)));
        }
        for (std::size_t i = 0; i < D; ++i) put(1 + i, simd::fma(ld(a, 1 + i), b0, a0 * ld(b, 1 + i)));
        put(0, a0 * b0);
    });
}

// The pullback of jet_product to a (to b: swap a and b), from the cotangent ybar of y:
//   abar   = sum over every column c of ybar_c b_c     (a enters y_c with the factor b_c)
//   abar_i = ybar_i b + 2 b_i sum_{S contains i} ybar_S
//   abar_S = ybar_S b
template <class T>
void jet_product_pullback(const T* b, const T* ybar, T* abar, std::size_t m, const JetColumns& cols) {
    const std::size_t D = cols.D, K = cols.second.size(), C = cols.C;
    kernels::vectors_then_scalars<T>(m, [&]<class V>(std::size_t s) {
        auto ld = [&](const T* q, std::size_t c) { return simd::loadv<V>(q + c * m + s); };
        const V b0 = ld(b, 0);
        V a0(0);
        for (std::size_t c = 0; c < C; ++c) a0 = simd::fma(ld(ybar, c), ld(b, c), a0);
        for (std::size_t i = 0; i < D; ++i) {
            V w(0);
            for (auto k : cols.containing[i]) w += ld(ybar, 1 + D + k);
            simd::storev(abar + (1 + i) * m + s, simd::fma(ld(ybar, 1 + i), b0, V(2) * w * ld(b, 1 + i)));
        }
        for (std::size_t k = 0; k < K; ++k) simd::storev(abar + (1 + D + k) * m + s, ld(ybar, 1 + D + k) * b0);
        simd::storev(abar + s, a0);
    });
}

// Parallel: every branch reads x's columns. Concat: the branches' columns side by side (each branch
// writes its block of y). Sum: y_c = sum_b o_b,c. Product: the jet products, one factor after the other,
// P_0 = o_0, P_b = jet_product(P_{b-1}, o_b), y = P_{B-1}, per feature. Dot: the same, with the last
// product summed over the features.
// Pullback: branch b's cotangent is ybar's block (Concat) or a copy of ybar (Sum). Product and Dot go
// backwards through the products, Pbar_{B-1} = ybar (Dot: the one ybar for every feature), then for
// b = B-1 .. 1:  obar_b = jet_product_pullback(P_{b-1}, Pbar_b),  Pbar_{b-1} = jet_product_pullback(o_b,
// Pbar_b); and obar_0 = Pbar_0. Each branch is pulled back as soon as its cotangent is known (last
// branch first). The branches' input cotangents add up (the first pulled back writes xbar, the others
// a scratch block added to it).
// Saved: the branch outputs (not for Concat), the partial products P_1 .. P_{B-2} (Product, Dot), then
// each branch's saved block. Scratch: a branch's cotangent (not for Concat), two Pbar buffers (Product,
// Dot), the input cotangent of a later branch, the largest branch scratch.
template <class Combine, class... Branches, class B>
struct TaylorRuleOf<Parallel<Combine, Branches...>, B> {
    static constexpr std::size_t NB = sizeof...(Branches);
    static constexpr bool concat = std::is_same_v<Combine, Concat>, dot = std::is_same_v<Combine, Dot>;
    // A Product of one branch is its output, as a Sum of one.
    static constexpr bool additive = std::is_same_v<Combine, Sum> || (std::is_same_v<Combine, Product> && NB == 1);
    static constexpr bool products = !concat && !additive;
    static constexpr std::size_t Fo = B::width[0];  // the branch width (Sum, Product, Dot)
    template <std::size_t I>
    using rule = TaylorRule<typename B::template branch<I>>;
    static constexpr std::size_t num_partials = products ? NB - 2 : 0;
    static constexpr std::size_t partials_offset = concat ? 0 : B::out_offset[NB];
    static constexpr std::size_t outputs_saved = partials_offset + num_partials * Fo;
    static constexpr auto saved_offset = []<std::size_t... I>(std::index_sequence<I...>) {
        const std::array<std::size_t, NB> own = {rule<I>::saved...};
        std::array<std::size_t, NB + 1> o{};
        o[0] = outputs_saved;
        for (std::size_t i = 0; i < NB; ++i) o[i + 1] = o[i] + own[i];
        return o;
    }(std::make_index_sequence<NB>{});
    static constexpr std::size_t saved = saved_offset[NB];
    static constexpr std::size_t cotangent_size = concat ? 0 : products ? 3 * Fo : Fo;
    static constexpr std::size_t dx_size = NB > 1 ? B::in_size : 0;
    static constexpr std::size_t scratch = []<std::size_t... I>(std::index_sequence<I...>) {
        return cotangent_size + dx_size + std::max({rule<I>::scratch...});
    }(std::make_index_sequence<NB>{});

    template <std::size_t I, class T>
    static T* output(T* y, T* sv, std::size_t N) {
        return (concat ? y : sv) + B::out_offset[I] * N;
    }
    // P_b (P_0 = o_0).
    template <class T>
    static T* partial(T* sv, std::size_t b, std::size_t N) {
        return b == 0 ? sv : sv + (partials_offset + (b - 1) * Fo) * N;
    }

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (rule<I>::forward(p + B::param_offset[I], x, output<I>(y, sv, N), sv + saved_offset[I] * N, m, cols), ...);
        }(std::make_index_sequence<NB>{});
        if constexpr (concat) {
            // the branches wrote their blocks of y
        } else if constexpr (additive) {
            std::copy_n(sv, Fo * N, y);
            for (std::size_t b = 1; b < NB; ++b) kernels::add_to(y, static_cast<const T*>(sv + B::out_offset[b] * N), Fo * N);
        } else {
            for (std::size_t b = 1; b < NB; ++b) {
                const T* left = partial(sv, b - 1, N);
                const T* right = sv + B::out_offset[b] * N;
                if (b + 1 < NB || !dot) {
                    T* dest = b + 1 < NB ? partial(sv, b, N) : y;
                    for (std::size_t k = 0; k < Fo; ++k) jet_product<false>(left + k * N, right + k * N, dest + k * N, m, cols);
                } else {
                    std::fill_n(y, N, T(0));
                    for (std::size_t k = 0; k < Fo; ++k) jet_product<true>(left + k * N, right + k * N, y, m, cols);
                }
            }
        }
    }

    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* sv, T* scr, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        T* const cotangent = scr;
        T* const pbar_buf[2] = {scr + Fo * N, scr + 2 * Fo * N};  // Product, Dot
        T* const branch_dx = scr + cotangent_size * N;
        T* const branch_scratch = branch_dx + dx_size * N;
        T* const sv_mut = const_cast<T*>(sv);  // read only
        [&]<std::size_t... R>(std::index_sequence<R...>) {
            (([&] {
                 constexpr std::size_t I = products ? NB - 1 - R : R;  // products: last branch first
                 T* dyb = cotangent;
                 if constexpr (concat) {
                     dyb = ybar + B::out_offset[I] * N;
                 } else if constexpr (additive) {
                     std::copy_n(ybar, Fo * N, dyb);
                 } else {
                     // Pbar_I: ybar (for Dot one feature, read for every k), or the buffer the step above wrote
                     const T* pbar = I == NB - 1 ? ybar : pbar_buf[I % 2];
                     const std::size_t stride = I == NB - 1 && dot ? 0 : N;
                     if constexpr (I >= 1) {
                         const T* left = partial(sv_mut, I - 1, N);
                         const T* own = sv + B::out_offset[I] * N;
                         T* next = pbar_buf[(I - 1) % 2];
                         for (std::size_t k = 0; k < Fo; ++k) {
                             jet_product_pullback(left + k * N, pbar + k * stride, dyb + k * N, m, cols);
                             jet_product_pullback(own + k * N, pbar + k * stride, next + k * N, m, cols);
                         }
                     } else {
                         dyb = pbar_buf[0];  // obar_0 = Pbar_0
                     }
                 }
                 T* dxb = !xbar ? nullptr : R == 0 ? xbar : branch_dx;
                 rule<I>::pullback(p + B::param_offset[I], g + B::param_offset[I], x, sv + saved_offset[I] * N,
                                   branch_scratch, dyb, dxb, m, cols);
                 if (xbar && R > 0) kernels::add_to(xbar, static_cast<const T*>(branch_dx), B::in_size * N);
             }()),
             ...);
        }(std::make_index_sequence<NB>{});
    }
};

}  // namespace detail

// The input-derivative pass of the chain Net (the layers of the header comment) for element type T,
// with its buffers for up to `batch` samples on `threads` threads, allocated once (calls within these
// bounds allocate nothing). Chunking and grouping as in Workspace (workspace.hpp): the same bits on any thread count.
template <class Net, class T>
class DerivativeWorkspace {
public:
    static constexpr std::size_t L = Net::num_layers;
    static constexpr std::size_t max_groups = 32;
    // The whole network's rule (a chain: its layers' rules one after the other, recursively).
    using Rule = detail::TaylorRule<typename Net::sequence>;
    static constexpr bool dense_only = []<std::size_t... I>(std::index_sequence<I...>) {
        return (TaylorDense<typename Net::template layer<I>> && ...);
    }(std::make_index_sequence<L>{});

    DerivativeWorkspace(DerivativeSpec spec, std::size_t batch, int threads = 0) : spec_(std::move(spec)) {
        for (const auto& set : spec_.second) {
            if (set.empty()) throw std::invalid_argument("DerivativeSpec: a second-derivative column sums no coordinate");
            for (auto i : set)
                if (i >= spec_.tangents)
                    throw std::invalid_argument("DerivativeSpec: second-derivative coordinate " + std::to_string(i) +
                                                " but only " + std::to_string(spec_.tangents) + " tangents");
        }
        C_ = spec_.columns();
        containing_.assign(spec_.tangents, {});
        for (std::size_t k = 0; k < spec_.second.size(); ++k)
            for (auto i : spec_.second[k]) containing_[i].push_back(k);
        // About 512 KiB of columns per chunk (two buffers per layer boundary), a multiple of 16 in [16, 256].
        // (A Dense chain keeps the chunk it had before containers, so its results keep their bits.)
        std::size_t per_sample = 0;
        if constexpr (dense_only)
            for (std::size_t l = 0; l <= L; ++l) per_sample += 2 * Net::width[l] * C_ * sizeof(T);
        else
            per_sample = (2 * Net::in_size + 2 * Net::out_size + Rule::saved + Rule::scratch) * C_ * sizeof(T);
        chunk_ = std::clamp<std::size_t>((512 * 1024 / per_sample) / 16 * 16, 16, 256);
        reserve(batch, threads);
    }

    const DerivativeSpec& spec() const { return spec_; }
    std::size_t chunk() const { return chunk_; }
    std::size_t num_chunks(std::size_t n) const { return (n + chunk_ - 1) / chunk_; }
    std::size_t chunks_per_group(std::size_t n) const { return (num_chunks(n) + max_groups - 1) / max_groups; }
    std::size_t num_groups(std::size_t n) const {
        const std::size_t per = std::max<std::size_t>(chunks_per_group(n), 1);
        return (num_chunks(n) + per - 1) / per;
    }

    void reserve(std::size_t batch, int threads = 0) {
        threads = resolve_threads(threads);
        if (scratch_.size() < static_cast<std::size_t>(threads)) scratch_.resize(static_cast<std::size_t>(threads));
        for (auto& s : scratch_) s.reserve(Net::in_size, C_, chunk_);
        // One partial gradient per slot of parallel_for_ordered, added into g group by group in order.
        const std::size_t groups = num_groups(batch), partials = ordered_slots(groups, threads);
        if (partial_.size() < partials * Net::num_params) partial_.resize(partials * Net::num_params);
        if (losses_.size() < groups) losses_.resize(groups);
    }

    // Input derivatives of n samples: x is n rows of Net::in_size (sample-major); out receives, per
    // sample, Net::out_size x C values (output o, column c at [s * out_size * C + o * C + c]).
    // With tangents == in_size, tangent i is d/dx_i.
    void derivatives(const T* p, const T* x, T* out, std::size_t n, int threads = 1) {
        require_input_tangents("derivatives");
        threads = resolve_threads(threads);
        reserve(n, threads);
        parallel_for(num_chunks(n), threads, [&](std::size_t c, int tid) {
            Scratch& s = scratch_[static_cast<std::size_t>(tid)];
            const std::size_t s0 = c * chunk_, m = std::min(chunk_, n - s0);
            load_inputs(s, x, nullptr, s0, m);
            forward(p, s, m);
            const T* y = s.out;
            const std::size_t cols = Net::out_size * C_;
            for (std::size_t j = 0; j < m; ++j)
                for (std::size_t q = 0; q < cols; ++q) out[(s0 + j) * cols + q] = y[q * m + j];
        });
    }

    // Forward mode through the chain (jvp): for each sample s, y = net(x_s) and ydot = J(x_s) v_s for
    // tangents_per_sample = spec().tangents directions v_s (rows of v: tangents x in_size per sample,
    // direction-major). y: n x out_size, ydot: n x tangents x out_size (sample-major). With second-order
    // columns, d2 (n x K x out_size) receives sum_{i in S_k} v_i^T H v_i (H: the output's input Hessian).
    void jvp(const T* p, const T* x, const T* v, T* y, T* ydot, std::size_t n, int threads = 1, T* d2 = nullptr) {
        threads = resolve_threads(threads);
        reserve(n, threads);
        const std::size_t D = spec_.tangents, K = spec_.second.size();
        parallel_for(num_chunks(n), threads, [&](std::size_t c, int tid) {
            Scratch& s = scratch_[static_cast<std::size_t>(tid)];
            const std::size_t s0 = c * chunk_, m = std::min(chunk_, n - s0);
            load_inputs(s, x, v, s0, m);
            forward(p, s, m);
            const T* out = s.out;
            constexpr std::size_t O = Net::out_size;
            for (std::size_t j = 0; j < m; ++j)
                for (std::size_t o = 0; o < O; ++o) {
                    const T* col = out + o * C_ * m;
                    y[(s0 + j) * O + o] = col[j];
                    for (std::size_t i = 0; i < D; ++i) ydot[((s0 + j) * D + i) * O + o] = col[(1 + i) * m + j];
                    if (d2)
                        for (std::size_t k = 0; k < K; ++k) d2[((s0 + j) * K + k) * O + o] = col[(1 + D + k) * m + j];
                }
        });
    }

    // The loss sum_s residual(...) * weight / n over n points (x: n rows of in_size, sample-major) and
    // its parameter gradient, ADDED into g (so several terms, e.g. interior and boundary, add up).
    // Chunks are grouped and summed in an order that depends on n only: the same bits on any thread count.
    template <class R>
        requires ResidualFunctor<R, T>
    T add_value_and_gradient(const T* p, T* g, const T* x, std::size_t n, const R& residual, T weight = T(1),
                             int threads = 1) {
        require_input_tangents("add_value_and_gradient");
        if (n == 0) return T(0);
        threads = resolve_threads(threads);
        reserve(n, threads);
        const T scale = weight / static_cast<T>(n);
        const std::size_t chunks = num_chunks(n), per = chunks_per_group(n), groups = num_groups(n);
        auto partial = [&](std::size_t slot) { return partial_.data() + slot * Net::num_params; };
        parallel_for_ordered(
            groups, threads,
            [&](std::size_t gi, int tid, std::size_t slot) {
                Scratch& s = scratch_[static_cast<std::size_t>(tid)];
                T* part = partial(slot);
                std::fill_n(part, Net::num_params, T(0));
                T l = 0;
                for (std::size_t c = gi * per; c < std::min(chunks, (gi + 1) * per); ++c) {
                    const std::size_t s0 = c * chunk_, m = std::min(chunk_, n - s0);
                    load_inputs(s, x, nullptr, s0, m);
                    forward(p, s, m);
                    std::fill_n(s.ybar, Net::out_size * C_ * m, T(0));
                    PointDerivatives<T> d{m, s0, Net::in_size, Net::out_size, spec_.tangents, spec_.second.size(), s.x, s.out};
                    PointCotangents<T> cot{m, Net::out_size, spec_.tangents, spec_.second.size(), s.ybar};
                    l += static_cast<T>(residual(d, cot, scale));
                    pullback(p, part, s, m);
                }
                losses_[gi] = l;
            },
            [&](std::size_t, std::size_t slot) { kernels::add_to(g, partial(slot), Net::num_params); });
        T total = 0;
        for (std::size_t i = 0; i < groups; ++i) total += losses_[i];
        return total * scale;
    }

    // The same three calls on spans, their sizes checked as value_and_gradient checks its buffers (one
    // std::invalid_argument naming the call and the buffer): n is x's number of rows (a positive whole
    // number of in_size values); p holds num_params values; out n * out_size * C; v n * tangents * in_size,
    // y n * out_size, ydot n * tangents * out_size, d2 empty (not wanted) or n * K * out_size; g num_params.
    void derivatives(std::span<const T> p, std::span<const T> x, std::span<T> out, int threads = 1) {
        constexpr const char* where = "DerivativeWorkspace::derivatives";
        const std::size_t n = checked_rows(where, p, x, threads);
        detail::expect_size(where, "the output buffer (n x out_size x columns)", n * Net::out_size * C_, out.size());
        derivatives(p.data(), x.data(), out.data(), n, threads);
    }
    void jvp(std::span<const T> p, std::span<const T> x, std::span<const T> v, std::span<T> y, std::span<T> ydot,
             int threads = 1, std::span<T> d2 = {}) {
        constexpr const char* where = "DerivativeWorkspace::jvp";
        const std::size_t n = checked_rows(where, p, x, threads);
        const std::size_t D = spec_.tangents, K = spec_.second.size();
        detail::expect_size(where, "the directions v (n x tangents x in_size)", n * D * Net::in_size, v.size());
        detail::expect_size(where, "the output y (n x out_size)", n * Net::out_size, y.size());
        detail::expect_size(where, "the tangent output ydot (n x tangents x out_size)", n * D * Net::out_size,
                            ydot.size());
        if (!d2.empty())
            detail::expect_size(where, "the second-derivative output d2 (n x second x out_size)",
                                n * K * Net::out_size, d2.size());
        jvp(p.data(), x.data(), v.data(), y.data(), ydot.data(), n, threads, d2.empty() ? nullptr : d2.data());
    }
    template <class R>
        requires ResidualFunctor<R, T>
    T add_value_and_gradient(std::span<const T> p, std::span<T> g, std::span<const T> x, const R& residual,
                             T weight = T(1), int threads = 1) {
        constexpr const char* where = "DerivativeWorkspace::add_value_and_gradient";
        const std::size_t n = checked_rows(where, p, x, threads);
        detail::expect_size(where, "the gradient buffer", Net::num_params, g.size());
        return add_value_and_gradient(p.data(), g.data(), x.data(), n, residual, weight, threads);
    }

private:
    struct Scratch {
        aligned_vector<T> buf;
        T* x = nullptr;      // in_size x chunk (plain inputs, for the residual)
        T* in = nullptr;     // in_size x C x chunk: the input columns
        T* out = nullptr;    // out_size x C x chunk: the output columns
        T* ybar = nullptr;   // out_size x C x chunk: their cotangents (the pullback clobbers them)
        T* saved = nullptr;  // Rule::saved x C x chunk (the activations and pre-activations inside)
        T* work = nullptr;   // Rule::scratch x C x chunk (the pullback's inner cotangents)
        std::size_t capacity = 0;

        void reserve(std::size_t in_size, std::size_t C, std::size_t chunk) {
            if (chunk <= capacity) return;
            const std::size_t sizes[] = {in_size * chunk, Net::in_size * C * chunk, Net::out_size * C * chunk,
                                         Net::out_size * C * chunk, Rule::saved * C * chunk, Rule::scratch * C * chunk};
            std::size_t total = 0;
            for (auto z : sizes) total += round_up16(z);
            buf.assign(total, T(0));
            T* q = buf.data();
            T** ptrs[] = {&x, &in, &out, &ybar, &saved, &work};
            for (std::size_t i = 0; i < 6; ++i) {
                *ptrs[i] = q;
                q += round_up16(sizes[i]);
            }
            capacity = chunk;
        }
    };

    std::size_t checked_rows(const char* where, std::span<const T> p, std::span<const T> x, int threads) const {
        detail::check_threads(where, threads);
        detail::expect_size(where, "the parameter buffer", Net::num_params, p.size());
        return detail::count_rows(where, x.size(), Net::in_size);
    }

    void require_input_tangents(const char* where) const {
        if (spec_.tangents != 0 && spec_.tangents != Net::in_size)
            throw std::invalid_argument(std::string(where) + ": the spec has " + std::to_string(spec_.tangents) +
                                         " tangents; input derivatives need none or one per input coordinate (" +
                                        std::to_string(Net::in_size) + ")");
    }

    // s.in for samples [s0, s0 + m): values, tangents (unit vectors, or the rows of v), second columns 0.
    void load_inputs(Scratch& s, const T* x, const T* v, std::size_t s0, std::size_t m) const {
        constexpr std::size_t F = Net::in_size;
        const std::size_t D = spec_.tangents;
        for (std::size_t f = 0; f < F; ++f) {
            T* row = s.in + f * C_ * m;
            for (std::size_t j = 0; j < m; ++j) s.x[f * m + j] = row[j] = x[(s0 + j) * F + f];
            for (std::size_t i = 0; i < D; ++i)
                for (std::size_t j = 0; j < m; ++j)
                    row[(1 + i) * m + j] = v ? v[((s0 + j) * D + i) * F + f] : T(i == f ? 1 : 0);
            std::fill_n(row + (1 + D) * m, spec_.second.size() * m, T(0));
        }
    }

    detail::JetColumns columns() const { return {spec_.tangents, C_, spec_.second, containing_}; }

    void forward(const T* p, Scratch& s, std::size_t m) const { Rule::forward(p, s.in, s.out, s.saved, m, columns()); }

    // s.ybar holds the cotangent of the output columns; adds the parameter gradient into g.
    void pullback(const T* p, T* g, Scratch& s, std::size_t m) const {
        Rule::pullback(p, g, static_cast<const T*>(s.in), static_cast<const T*>(s.saved), s.work, s.ybar,
                       static_cast<T*>(nullptr), m, columns());
    }

    DerivativeSpec spec_;
    std::vector<std::vector<std::size_t>> containing_;  // see detail::JetColumns
    std::size_t C_ = 1, chunk_ = 16;
    std::vector<Scratch> scratch_;
    aligned_vector<T> partial_;
    std::vector<T> losses_;
};

}  // namespace chainlet
