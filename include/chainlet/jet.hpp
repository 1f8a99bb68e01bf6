// The derivative passes' vocabulary, below the layers: the jet columns, an activation's rule on them,
// and how a pass finds a layer's rules. A layer's own header holds its rules (layer.hpp: the optional
// member types jet_rule and hvp_rule); derivatives/ holds the workspaces that walk a chain by them.
//
// Jet columns (the input-derivative pass, derivatives/taylor.hpp): per feature C = 1 + D + K columns,
//   column 0          the value a
//   columns 1 .. D    tangents a_i = da/dt_i (the input derivatives d/dx_i, or the caller's directions)
//   columns 1+D+k     second derivatives a_S = sum_{i in S_k} d2a/dt_i^2
// a chunk of m samples feature-major with the columns inside a feature: [f][c][s] at f C m + c m + s.
// Through an element-wise y = f(z) (an activation):
//   y = f(z),  y_i = f'(z) z_i,  y_S = f''(z) sum_{i in S} z_i^2 + f'(z) z_S
// and back, from the cotangents ybar of every column (needs f'''):
//   zbar   = ybar f' + sum_i ybar_i f'' z_i + sum_S ybar_S (f''' sum_{i in S} z_i^2 + f'' z_S)
//   zbar_i = ybar_i f' + sum_{S contains i} 2 ybar_S f'' z_i
//   zbar_S = ybar_S f'
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "chainlet/activations.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/kernels/vector_loop.hpp"
#include "chainlet/layer.hpp"

namespace chainlet {

// What every rule reads about the columns: D tangents, the second-derivative sets, C = 1 + D + K columns,
// and containing[i] (the second-derivative columns whose set holds tangent i).
struct JetColumns {
    std::size_t D = 0, C = 1;
    const std::vector<std::vector<std::size_t>>& second;
    const std::vector<std::vector<std::size_t>>& containing;
};

// An activation with a jet (its value and first three derivatives, activations.hpp), which both passes
// need in a Dense, a convolution or an ActivationLayer. Every built-in activation has one; the Activation concept does
// not ask for it, so a user's activation may have none (and then stays out of these two passes).
template <class Act>
concept JetActivation = requires { { Act::template jet<double>(0.0) }; };

namespace detail {
// The activation the Dense, convolution and ActivationLayer rules of both passes compute with: Act, or, where Act has
// no jet, Identity after the assertion has said so, which then stays the only error. Layer (the bound
// layer) makes it one assertion per layer type, named in the "In instantiation of" line; the "required
// from" lines after it name the pass that needed it first. A function, not a class: see no_derivative_rule.
template <class Act, class Layer>
constexpr bool checked_jet() {
    static_assert(JetActivation<Act>,
                  "chainlet: the input-derivative pass (derivatives/taylor.hpp) and the parameter Hessian-vector "
                  "product (derivatives/hvp.hpp) need an activation with a jet (Act::jet: the value and three "
                  "derivatives), which every built-in activation has; the layer named as Layer in checked_jet<Act, "
                  "Layer> (a Dense, Conv, Conv1D or ActivationLayer) uses one without it");
    return JetActivation<Act>;
}
template <class Act, class Layer>
using jet_activation = std::conditional_t<checked_jet<Act, Layer>(), Act, Identity>;

// The assertion met by a layer without a rule for a pass. A stand-in (layer.hpp's broken_layer) passes:
// its chain's error has been reported. It sits in a function that the stub's `saved` calls: clang, unlike
// g++, marks a class whose own static_assert failed as invalid, and every constant computed from its
// members then fails too (a cascade of errors after the one that matters).
template <class B>
constexpr std::size_t no_derivative_rule() {
    static_assert(is_broken_layer<B>,
                  "chainlet: the input-derivative pass (derivatives/taylor.hpp) and the parameter Hessian-vector "
                  "product (derivatives/hvp.hpp) need the layer's derivative rules, its member types jet_rule and "
                  "hvp_rule (chainlet/layer.hpp); the layer in the \"required from\" line declares none for the "
                  "pass (built in: Dense, ActivationLayer, Conv, Conv1D, LayerNorm, RMSNorm, Softmax, Slice, Flatten, the average and "
                  "max poolings, Dropout, FourierFeatures, Residual and Parallel)");
    return 0;
}
// A rule whose `layer` is not the layer that holds it: a bound layer derived from another's inherits its
// member types, and the base's rule computes the base's derivatives, for a layer that may compute
// something else.
template <class B>
constexpr std::size_t inherited_derivative_rule() {
    static_assert(always_false<B>,
                  "chainlet: the layer in the \"required from\" line holds a jet_rule or hvp_rule whose `layer` is "
                  "another layer: it inherits that layer's rules (its bound derives from that layer's bound), which "
                  "compute that layer's derivatives; declare its own (chainlet/layer.hpp)");
    return 0;
}

// A rule without `using layer = ...;`: it cannot say whose it is.
template <class B>
constexpr std::size_t rule_without_layer() {
    static_assert(always_false<B>,
                  "chainlet: the jet_rule or hvp_rule of the layer in the \"required from\" line has no member "
                  "`layer`: declare `using layer = bound;` in it (chainlet/layer.hpp)");
    return 0;
}

// What a pass calls in place of a missing rule (Kind: what is wrong with it): reading
// `saved` asserts (one of the two functions above), the stubs keep that the only error, and
// `available` is false (a container or chain holding the layer has no rule either, which the checker
// reads without an error: layer_check.hpp). A stand-in passes the assertion, and its stubs throw as its
// forward does (layer.hpp). Every rule's constants are written with their types, not `auto`, so that
// instantiating a rule to read `available` evaluates none of them.
enum class MissingRule { none, inherited, without_layer };
template <class B, MissingRule Kind>
constexpr std::size_t missing_rule() {
    if constexpr (Kind == MissingRule::inherited)
        return inherited_derivative_rule<B>();
    else if constexpr (Kind == MissingRule::without_layer)
        return rule_without_layer<B>();
    else
        return no_derivative_rule<B>();
}
template <class B, MissingRule Kind>
struct rule_stub {
    static constexpr std::size_t saved = missing_rule<B, Kind>();
    static constexpr std::size_t scratch = 0;
    static constexpr bool available = false;
    template <class T>
    static void forward(const T*, const T*, T*, T*, std::size_t, const JetColumns&) {
        stand_in_ran();
    }
    template <class T>
    static void pullback(const T*, T*, const T*, const T*, T*, T*, T*, std::size_t, const JetColumns&) {
        stand_in_ran();
    }
    template <class T>
    static void forward(const T*, const T*, const T*, const T*, T*, T*, T*, std::size_t) {
        stand_in_ran();
    }
    template <class T>
    static void pullback(const T*, const T*, T*, T*, const T*, const T*, const T*, T*, T*, T*, T*, T*, std::size_t) {
        stand_in_ran();
    }
};

template <class B, class Rule>
struct owned_rule {
    using type = rule_stub<B, MissingRule::without_layer>;
};
template <class B, class Rule>
    requires requires { typename Rule::layer; }
struct owned_rule<B, Rule> {
    using type = std::conditional_t<std::same_as<typename Rule::layer, B>, Rule, rule_stub<B, MissingRule::inherited>>;
};

template <class B>
struct select_jet_rule {
    using type = rule_stub<B, MissingRule::none>;
};
template <class B>
    requires requires { typename B::jet_rule; }
struct select_jet_rule<B> {
    using type = typename owned_rule<B, typename B::jet_rule>::type;
};
template <class B>
struct select_hvp_rule {
    using type = rule_stub<B, MissingRule::none>;
};
template <class B>
    requires requires { typename B::hvp_rule; }
struct select_hvp_rule<B> {
    using type = typename owned_rule<B, typename B::hvp_rule>::type;
};

// Whether a rule holds for the layer's template arguments and parts (layer.hpp's `available`, true where
// a rule does not say). Only check_layer reads it, to leave such a rule out: a pass that uses a rule
// without one fails to compile by the rule's own assertion (Dense's through checked_jet) or by a part's.
template <class Rule>
constexpr bool rule_available() {
    if constexpr (requires { Rule::available; })
        return Rule::available;
    else
        return true;
}

// The rules a pass walks a chain by: the bound layer's own jet_rule (the input-derivative pass) and
// hvp_rule (the parameter Hessian-vector product), chosen by what the layer declares.
template <class B>
using jet_rule_of = typename select_jet_rule<B>::type;
template <class B>
using hvp_rule_of = typename select_hvp_rule<B>::type;

// The element-wise rule of the header comment, y = f(z), on `out` features (z, y, zbar: out x C x n), for
// Dense (f after its affine map) and ActivationLayer (z = its input).
// An activation with `output_jet` (its derivatives are functions of y = f(z): identity, ReLU, tanh,
// sigmoid) lets the pullback read the jet from y: Dense's forward then stores y's value column over z's
// column 0 (`in_place`), so the pullback evaluates no f again.
template <class Act>
concept HasOutputJet = requires { Act::template output_jet<double>(0.0); };

template <class Act, class T>
struct ActivationJetRule {
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

// The rules of a layer without parameters whose forward is linear in its input and whose pullback does not
// read y (Flatten, the average poolings, Dropout as in inference): every jet column maps as the value
// does, y_c = L x_c, so the rule runs the layer's own forward on the C m columns as C m samples, and its
// pullback likewise, xbar_c = L^T ybar_c. The R-operator: Ry = L Rx, R xbar = L^T R ybar. The layer's own
// storage serves (C times, or twice), and its pullback gets y = nullptr.
template <class B>
constexpr bool parameter_free() {
    static_assert(B::num_params == 0, "chainlet: the rules of a linear layer (jet.hpp) are for layers without parameters");
    return B::num_params == 0;
}
template <class B>
struct LinearLayerJetRule {
    static constexpr bool available = parameter_free<B>();
    using layer = B;
    static constexpr std::size_t saved = B::saved_per_sample, scratch = B::scratch_per_sample;
    template <class T>
    static void forward(const T* p, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        layer_forward<B>(p, x, y, sv, cols.C * m, Pass{});
    }
    template <class T>
    static void pullback(const T* p, T*, const T* x, const T* sv, T* scr, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        if (xbar) B::pullback(p, static_cast<T*>(nullptr), x, static_cast<const T*>(nullptr), const_cast<T*>(sv), scr, ybar,
                              xbar, cols.C * m);
    }
};
template <class B>
struct LinearLayerHvpRule {
    static constexpr bool available = parameter_free<B>();
    using layer = B;
    static constexpr std::size_t saved = 2 * B::saved_per_sample, scratch = B::scratch_per_sample;
    template <class T>
    static void forward(const T* p, const T*, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        layer_forward<B>(p, x, y, sv, m, Pass{});
        if (rx) layer_forward<B>(p, rx, ry, sv + B::saved_per_sample * m, m, Pass{});
        else std::fill_n(ry, B::out_size * m, T(0));
    }
    template <class T>
    static void pullback(const T* p, const T*, T*, T*, const T* x, const T* rx, const T* sv, T* scr, T* ybar, T* rybar,
                         T* xbar, T* rxbar, std::size_t m) {
        if (!xbar) return;
        T* const svm = const_cast<T*>(sv);  // read only (layer.hpp: a pullback leaves saved as it is)
        B::pullback(p, static_cast<T*>(nullptr), x, static_cast<const T*>(nullptr), svm, scr, ybar, xbar, m);
        B::pullback(p, static_cast<T*>(nullptr), rx ? rx : x, static_cast<const T*>(nullptr),
                    svm + (rx ? B::saved_per_sample * m : 0), scr, rybar, rxbar, m);
    }
};

}  // namespace detail

}  // namespace chainlet
