// Chain<Input<...>, Layers...>: threads the sample shape through the layers at compile time, so the
// parameter count, every layer's offset into the flat parameter buffer, and every activation size are
// constants. Each layer type L is bound to its input shape as L::bound<InShape> and checked against the
// layer contract (layer.hpp).
//
// A chain is itself a bound layer (detail::Sequence): its saved storage holds the activations between
// its layers and every layer's saved storage; its scratch holds two cotangent buffers and the largest
// scratch of a layer. So a container (Residual, Parallel) holds inner chains as layers, and Workspace
// treats the whole network as one layer.
//
// All activations are feature-major within a chunk of n samples: element f of sample s is at [f * n + s].
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

namespace detail {

template <class InShape, class... Layers>
struct bind_all;

template <class InShape>
struct bind_all<InShape> {
    using type = std::tuple<>;
    using out_shape = InShape;
};

// The layers after one that could not be bound: stand-ins, unchecked, since their input shapes would
// follow from a wrong one (the error already reported is the only one).
template <class InShape, class Layer>
using stand_in_for = broken_layer<InShape>;
template <class InShape, class... Layers>
struct bind_none {
    using type = std::tuple<stand_in_for<InShape, Layers>...>;
    using out_shape = InShape;
};

template <class BoundLayers>
struct holds_broken_layer;
template <class... B>
struct holds_broken_layer<std::tuple<B...>> : std::bool_constant<(is_broken_layer<B> || ...)> {};

template <class InShape, class L, class... Rest>
struct bind_all<InShape, L, Rest...> {
    using bound = checked_bound<L, InShape>;
    using next = std::conditional_t<is_broken_layer<bound>, bind_none<InShape, Rest...>,
                                    bind_all<typename bound::out_shape, Rest...>>;
    using type = decltype(std::tuple_cat(std::declval<std::tuple<bound>>(), std::declval<typename next::type>()));
    using out_shape = typename next::out_shape;
};

// Where each of L blocks starts when they follow `first` values, block i holding own[i]: {first, first +
// own[0], ...}; the last entry is where they end.
template <std::size_t L>
constexpr std::array<std::size_t, L + 1> blocks_after(std::size_t first, const std::array<std::size_t, L>& own) {
    std::array<std::size_t, L + 1> o{};
    o[0] = first;
    for (std::size_t i = 0; i < L; ++i) o[i + 1] = o[i] + own[i];
    return o;
}

// Calls f(std::integral_constant<std::size_t, I>{}) for I = 0 .. L - 1 (each_layer) or L - 1 .. 0
// (each_layer_last_first): the order of a forward pass and of a pullback.
template <std::size_t L, class F>
constexpr void each_layer(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (f(std::integral_constant<std::size_t, I>{}), ...);
    }(std::make_index_sequence<L>{});
}
template <std::size_t L, class F>
constexpr void each_layer_last_first(F&& f) {
    [&]<std::size_t... R>(std::index_sequence<R...>) {
        (f(std::integral_constant<std::size_t, L - 1 - R>{}), ...);
    }(std::make_index_sequence<L>{});
}

// Fixed parameters (layer.hpp) of parts laid out one after the other in a parameter slice (a chain's
// layers, a Parallel's branches; offset[k] where part k's entries start): their count, and whether entry
// i is one (the owning part's answer).
template <class Parts>
struct parts_fixed_params;
template <class... B>
struct parts_fixed_params<std::tuple<B...>> {
    static constexpr std::size_t count = (fixed_param_count<B>() + ...);
    template <std::size_t N>
    static constexpr bool at(const std::array<std::size_t, N>& offset, std::size_t i) {
        bool fixed = false;
        each_layer<sizeof...(B)>([&](auto k) {
            constexpr std::size_t K = decltype(k)::value;
            if (i >= offset[K] && i < offset[K + 1])
                fixed = is_fixed_param<std::tuple_element_t<K, std::tuple<B...>>>(i - offset[K]);
        });
        return fixed;
    }
};

// The sizes of bound layers one after the other: widths at the boundaries, where each layer's
// parameters start, and the inner boundaries' activations as the walks below lay them out.
template <std::size_t InSize, class Bound>
struct SequenceGeometry;
template <std::size_t InSize, class... B>
struct SequenceGeometry<InSize, std::tuple<B...>> {
    static constexpr std::size_t num_layers = sizeof...(B);
    static constexpr std::array<std::size_t, num_layers> layer_params{B::num_params...};
    // param_offset[i]: where layer i's parameters start; param_offset[num_layers] == num_params.
    static constexpr auto param_offset = blocks_after<num_layers>(0, layer_params);
    static constexpr std::size_t num_params = param_offset[num_layers];
    // width[i]: features per sample entering layer i; width[num_layers] is the output's.
    static constexpr std::array<std::size_t, num_layers + 1> width{InSize, B::out_size...};
    static constexpr std::size_t max_width = *std::max_element(width.begin(), width.end());
    // The inner activations width[1 .. num_layers - 1], one after the other: act_offset[i] is where the
    // input of layer i starts (i >= 1); inner_width_sum their total, max_inner_width the widest.
    static constexpr auto act_offset = [] {
        std::array<std::size_t, num_layers + 1> o{};
        for (std::size_t i = 2; i < num_layers; ++i) o[i] = o[i - 1] + width[i - 1];
        return o;
    }();
    static constexpr std::size_t inner_width_sum = [] {
        std::size_t s = 0;
        for (std::size_t i = 1; i < num_layers; ++i) s += width[i];
        return s;
    }();
    static constexpr std::size_t max_inner_width = [] {
        std::size_t m = 0;
        for (std::size_t i = 1; i < num_layers; ++i) m = std::max(m, width[i]);
        return m;
    }();
    // Cotangent buffers a pullback ping-pongs between at the inner boundaries: two, one when there is
    // only one inner boundary, none for a single layer.
    static constexpr std::size_t cotangent_buffers = num_layers >= 3 ? 2 : num_layers - 1;
};

// The one layout of a sequence's storage, shared by training, the jets and the R-operator; each pass
// gives its layers' own sizes (Sizes::saved, Sizes::scratch) and the number of copies of every
// activation it carries (Copies: 1, the values; 2 for the R-operator, the values and their R-derivatives).
// Per sample, times N columns (N = n samples; C m jet columns):
//   saved:   the inner activations (copy c at c * inner_width_sum + act_offset[i]), then every layer's
//            saved block (saved_offset[i]);
//   scratch: per copy, the ping-pong cotangent buffers of the inner boundaries (the cotangent of layer
//            i's output in buffer i % 2), then the largest layer scratch (the layers run one at a time).
template <class G, std::size_t Copies, class Sizes>
struct SequenceWalk {
    static constexpr std::size_t L = G::num_layers, W = G::max_inner_width;
    static constexpr auto saved_offset = blocks_after<L>(Copies * G::inner_width_sum, Sizes::saved);
    static constexpr std::size_t saved = saved_offset[L];
    static constexpr std::size_t layer_scratch_offset = Copies * G::cotangent_buffers * W;
    static constexpr std::size_t scratch =
        layer_scratch_offset + *std::max_element(Sizes::scratch.begin(), Sizes::scratch.end());

    // The activation entering layer I (x, the sequence's input, for I = 0) and leaving it (y, its output,
    // for the last), copy c.
    template <std::size_t I, class T>
    static const T* in(const T* x, const T* sv, std::size_t N, std::size_t c = 0) {
        if constexpr (I == 0) return x;
        else return sv + (c * G::inner_width_sum + G::act_offset[I]) * N;
    }
    template <std::size_t I, class T>
    static T* out(T* y, T* sv, std::size_t N, std::size_t c = 0) {
        if constexpr (I + 1 == L) return y;
        else return sv + (c * G::inner_width_sum + G::act_offset[I + 1]) * N;
    }
    template <std::size_t I, class T>
    static T* layer_saved(T* sv, std::size_t N) {
        return sv + saved_offset[I] * N;
    }
    template <class T>
    static T* layer_scratch(T* scr, std::size_t N) {
        return scr + layer_scratch_offset * N;
    }
    // The cotangent of layer I's output (ybar, the sequence's, for the last) and of its input (xbar for
    // I = 0), copy c.
    template <std::size_t I, class T>
    static T* out_bar(T* ybar, T* scr, std::size_t N, std::size_t c = 0) {
        if constexpr (I + 1 == L) return ybar;
        else return scr + (c * G::cotangent_buffers + I % 2) * W * N;
    }
    template <std::size_t I, class T>
    static T* in_bar(T* xbar, T* scr, std::size_t N, std::size_t c = 0) {
        if constexpr (I == 0) return xbar;
        else return out_bar<I - 1>(xbar, scr, N, c);
    }
};

// Per-layer sizes for SequenceWalk: training's (a bound layer's saved and scratch per sample) and a
// pass's (its rules' saved and scratch per column).
template <class Bound>
struct training_sizes;
template <class... B>
struct training_sizes<std::tuple<B...>> {
    static constexpr std::array<std::size_t, sizeof...(B)> saved{B::saved_per_sample...}, scratch{B::scratch_per_sample...};
};
template <class... Rules>
struct rule_sizes {
    static constexpr std::array<std::size_t, sizeof...(Rules)> saved{Rules::saved...}, scratch{Rules::scratch...};
};

// The walk of sequence S for a pass whose rule of a bound layer B is RuleOf<B>.
template <class S, std::size_t Copies, template <class> class RuleOf, class I = std::make_index_sequence<S::num_layers>>
struct rules_walk;
template <class S, std::size_t Copies, template <class> class RuleOf, std::size_t... I>
struct rules_walk<S, Copies, RuleOf, std::index_sequence<I...>> {
    using type = SequenceWalk<typename S::geometry, Copies, rule_sizes<RuleOf<typename S::template layer<I>>...>>;
};

// Layer: the bound layer the rules are for, the sequence itself or a Chain (which is its sequence).
template <class S, class Layer = S>
struct SequenceJetRule;
template <class S, class Layer = S>
struct SequenceHvpRule;

// Layers... bound one after the other to InShape: a bound layer itself (see layer.hpp).
template <class InShape, class... Layers>
struct Sequence {
    static_assert(sizeof...(Layers) >= 1, "a Chain needs at least one layer after its Input");

    using in_shape = InShape;
    using layers = typename bind_all<in_shape, Layers...>::type;
    using out_shape = typename bind_all<in_shape, Layers...>::out_shape;
    template <std::size_t I>
    using layer = std::tuple_element_t<I, layers>;

    static constexpr std::size_t num_layers = sizeof...(Layers);
    // A layer could not be bound and said why (layer.hpp): the chain holds stand-ins from there on. A
    // container holding this chain rejects its own shape silently then.
    static constexpr bool rejects_shape = holds_broken_layer<layers>::value;
    static constexpr std::size_t in_size = in_shape::size;
    static constexpr std::size_t out_size = out_shape::size;
    using jet_rule = SequenceJetRule<Sequence>;  // the derivative passes' rules (below)
    using hvp_rule = SequenceHvpRule<Sequence>;

    using geometry = SequenceGeometry<in_size, layers>;
    // Training's storage (SequenceWalk): saved holds the inner activations, then every layer's saved
    // storage; scratch the ping-pong cotangent buffers, then the largest layer scratch.
    using walk = SequenceWalk<geometry, 1, training_sizes<layers>>;
    static constexpr auto layer_params = geometry::layer_params;
    static constexpr auto param_offset = geometry::param_offset;
    static constexpr std::size_t num_params = geometry::num_params;
    static constexpr auto width = geometry::width;
    static constexpr std::size_t max_width = geometry::max_width;
    static constexpr auto act_offset = geometry::act_offset;
    static constexpr std::size_t max_inner_width = geometry::max_inner_width;
    static constexpr auto saved_offset = walk::saved_offset;
    static constexpr std::size_t saved_per_sample = walk::saved;
    static constexpr std::size_t layer_scratch_offset = walk::layer_scratch_offset;
    static constexpr std::size_t scratch_per_sample = walk::scratch;
    // Fixed parameters (layer.hpp): the layers' own, at their offsets.
    static constexpr std::size_t num_fixed_params = parts_fixed_params<layers>::count;
    static constexpr bool fixed_param(std::size_t i) { return parts_fixed_params<layers>::at(param_offset, i); }

    // Fills p with each layer's initial values; layer i draws from its own stream, so inserting a
    // layer does not change the draws of the layers before it.
    template <class T>
    static void init(std::span<T> p, std::uint64_t seed, InitKind kind) {
        each_layer<num_layers>([&](auto i) {
            constexpr std::size_t I = decltype(i)::value;
            Rng rng(seed * 0x9E3779B97F4A7C15ull + I + 1);
            layer<I>::init(p.subspan(param_offset[I], layer_params[I]), rng, kind);
        });
    }
    // As a layer inside a container: the container's stream seeds the chain's.
    template <class T>
    static void init(std::span<T> p, Rng& rng, InitKind kind) {
        init(p, rng.next(), kind);
    }

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n, const Pass& pass = {}) {
        each_layer<num_layers>([&](auto i) {
            constexpr std::size_t I = decltype(i)::value;
            layer_forward<layer<I>>(p + param_offset[I], walk::template in<I>(x, saved, n),
                                    walk::template out<I>(y, saved, n), walk::template layer_saved<I>(saved, n), n,
                                    substream(pass, I));
        });
    }

    // Pulls dy back through every layer, last to first, adding parameter gradients into g; dx (may be
    // null) receives the input cotangent. Keeps the contract of layer.hpp.
    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                         std::size_t n) {
        pullback_layers<true>(p, g, x, y, saved, scratch, dy, dx, n);
    }
    // The same, writing the parameter gradients into g (layer.hpp's optional pullback_assign).
    template <class T>
    static void pullback_assign(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                                std::size_t n) {
        pullback_layers<false>(p, g, x, y, saved, scratch, dy, dx, n);
    }

    // The activation entering layer I (the chain's input for I = 0) and leaving it (the output for the last).
    template <std::size_t I, class T>
    static const T* input(const T* x, T* saved, std::size_t n) {
        return walk::template in<I>(x, saved, n);
    }
    template <std::size_t I, class T>
    static T* output(T* y, T* saved, std::size_t n) {
        return walk::template out<I>(y, saved, n);
    }

    // Metadata (layer_metadata.hpp): "Dense[32,tanh] Dense[1,identity]" and the layers' tensors.
    static std::string describe() {
        std::string s;
        each_layer<num_layers>([&](auto i) { s.append(i ? " " : "").append(describe_layer<decltype(i)::value>()); });
        return s;
    }
    static void torch_layout(TorchModules& m, std::size_t offset) {
        each_layer<num_layers>([&](auto i) { torch_layer<decltype(i)::value>(m, offset + param_offset[i]); });
    }

    // Whether layer L's pullback also does layer L + 1's: L has pullback_from_rows and L + 1
    // cotangent_rows (layer.hpp), as a Conv followed by a MaxPool.
    template <std::size_t L, class T>
    static constexpr bool pulls_back_next() {
        if constexpr (L + 1 < num_layers)
            return has_pullback_from_rows<layer<L>, T> && has_cotangent_rows<layer<L + 1>, T>;
        else
            return false;
    }
    template <std::size_t L, class T>
    static constexpr bool pulled_back_by_previous() {
        if constexpr (L > 0)
            return pulls_back_next<L - 1, T>();
        else
            return false;
    }

    // Step num_layers - 1 - L of pullback (layer L, with the arguments of the whole chain's pullback):
    // nothing where layer L - 1 pulls back through L too; else layer L's pullback, adding into g
    // (accumulate) or writing it, and for a pair the one call that does both (pullback_from_rows, with
    // the next layer's cotangent_rows as the source of its cotangent). Public for bench/profile.cpp.
    template <std::size_t L, bool accumulate, class T>
    static void pullback_layer(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                               std::size_t n) {
        if constexpr (pulled_back_by_previous<L, T>()) {
            return;
        } else {
            T* const layer_scratch_ptr = walk::layer_scratch(scratch, n);
            T* dyl = walk::template out_bar<L>(dy, scratch, n);
            T* dxl = walk::template in_bar<L>(dx, scratch, n);
            const T* xl = walk::template in<L>(x, saved, n);
            T* yl = walk::template out<L>(const_cast<T*>(y), saved, n);
            if constexpr (pulls_back_next<L, T>()) {
                using next = layer<L + 1>;
                const T* next_y = walk::template out<L + 1>(const_cast<T*>(y), saved, n);
                const T* next_dy = walk::template out_bar<L + 1>(dy, scratch, n);
                auto rows = [&](std::size_t r0, std::size_t r1, T* out) {
                    next::cotangent_rows(static_cast<const T*>(yl), next_y, next_dy, out, r0, r1, n);
                };
                if constexpr (!accumulate) std::fill_n(g + param_offset[L], layer_params[L], T(0));
                layer<L>::pullback_from_rows(p + param_offset[L], g + param_offset[L], xl, yl,
                                             walk::template layer_saved<L>(saved, n), layer_scratch_ptr, dyl, dxl, n, rows,
                                             std::size_t{next::cotangent_row_block});
            } else {
                detail::layer_pullback<accumulate, layer<L>>(p + param_offset[L], g + param_offset[L], xl, yl,
                                                             walk::template layer_saved<L>(saved, n), layer_scratch_ptr,
                                                             dyl, dxl, n);
            }
        }
    }

private:
    template <bool accumulate, class T>
    static void pullback_layers(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                                std::size_t n) {
        each_layer_last_first<num_layers>([&](auto l) {
            pullback_layer<decltype(l)::value, accumulate>(p, g, x, y, saved, scratch, dy, dx, n);
        });
    }

    template <std::size_t I>
    static std::string describe_layer() {
        static_assert(Describable<layer<I>>,
                      "chainlet: saving this chain needs every layer's metadata; this layer has no `static std::string "
                      "describe()` (see chainlet/layer.hpp)");
        if constexpr (Describable<layer<I>>) return layer<I>::describe();
        else return {};
    }
    template <std::size_t I>
    static void torch_layer(TorchModules& m, std::size_t offset) {
        static_assert(TorchDescribable<layer<I>>,
                      "chainlet: a safetensors file of this chain needs every layer's PyTorch layout; this layer has no "
                      "`static void torch_layout(TorchModules&, std::size_t)` (see chainlet/layer_metadata.hpp)");
        if constexpr (TorchDescribable<layer<I>>) layer<I>::torch_layout(m, offset);
    }
};

// A chain's rules in the derivative passes (layer.hpp; also a Residual's inner chain's and a Parallel's
// branch's): the layers' rules one after the other, in the sequence's walk (SequenceWalk) with the rules'
// sizes. The jets carry each activation once, every feature as C columns a sample; the R-operator twice
// (a, then Ra), with two cotangents at each boundary (bar, then R bar).
template <class S, class Layer>
struct SequenceJetRule {
    using layer = Layer;
    static constexpr std::size_t L = S::num_layers;
    template <std::size_t I>
    using rule = jet_rule_of<typename S::template layer<I>>;
    using walk = typename rules_walk<S, 1, jet_rule_of>::type;
    static constexpr bool available = []<std::size_t... I>(std::index_sequence<I...>) {
        return (rule_available<rule<I>>() && ...);
    }(std::make_index_sequence<L>{});
    static constexpr std::size_t saved = walk::saved, scratch = walk::scratch;

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        each_layer<L>([&](auto i) {
            constexpr std::size_t I = decltype(i)::value;
            rule<I>::forward(p + S::param_offset[I], walk::template in<I>(x, sv, N), walk::template out<I>(y, sv, N),
                             walk::template layer_saved<I>(sv, N), m, cols);
        });
    }
    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* sv, T* scr, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        each_layer_last_first<L>([&](auto i) {
            constexpr std::size_t I = decltype(i)::value;
            rule<I>::pullback(p + S::param_offset[I], g + S::param_offset[I], walk::template in<I>(x, sv, N),
                              walk::template layer_saved<I>(sv, N), walk::layer_scratch(scr, N),
                              walk::template out_bar<I>(ybar, scr, N), walk::template in_bar<I>(xbar, scr, N), m, cols);
        });
    }
};

template <class S, class Layer>
struct SequenceHvpRule {
    using layer = Layer;
    static constexpr std::size_t L = S::num_layers;
    template <std::size_t I>
    using rule = hvp_rule_of<typename S::template layer<I>>;
    using walk = typename rules_walk<S, 2, hvp_rule_of>::type;
    static constexpr bool available = []<std::size_t... I>(std::index_sequence<I...>) {
        return (rule_available<rule<I>>() && ...);
    }(std::make_index_sequence<L>{});
    static constexpr std::size_t saved = walk::saved, scratch = walk::scratch;

    template <class T>
    static void forward(const T* p, const T* v, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        each_layer<L>([&](auto i) {
            constexpr std::size_t I = decltype(i)::value;
            rule<I>::forward(p + S::param_offset[I], v + S::param_offset[I], walk::template in<I>(x, sv, m),
                             walk::template in<I>(rx, sv, m, 1), walk::template out<I>(y, sv, m),
                             walk::template out<I>(ry, sv, m, 1), walk::template layer_saved<I>(sv, m), m);
        });
    }
    template <class T>
    static void pullback(const T* p, const T* v, T* g, T* hv, const T* x, const T* rx, const T* sv, T* scr, T* ybar,
                         T* rybar, T* xbar, T* rxbar, std::size_t m) {
        each_layer_last_first<L>([&](auto i) {
            constexpr std::size_t I = decltype(i)::value;
            rule<I>::pullback(p + S::param_offset[I], v + S::param_offset[I], g + S::param_offset[I],
                              hv + S::param_offset[I], walk::template in<I>(x, sv, m), walk::template in<I>(rx, sv, m, 1),
                              walk::template layer_saved<I>(sv, m), walk::layer_scratch(scr, m),
                              walk::template out_bar<I>(ybar, scr, m), walk::template out_bar<I>(rybar, scr, m, 1),
                              walk::template in_bar<I>(xbar, scr, m), walk::template in_bar<I>(rxbar, scr, m, 1), m);
        });
    }
};

// A layer type that binds to a stand-in: what a Chain holds when its input or its list of layers is
// wrong (below), so that the assertion that said why is the only error.
struct stand_in_layer {
    template <class InShape>
    using bound = broken_layer<InShape>;
};
// The whole stand-in chain.
using stand_in_sequence = Sequence<Shape<1>, stand_in_layer>;

// Whether a Chain's input and layers can be bound; the first mistake is asserted (in a function, not in
// a class body: see layer.hpp's rejects_shape). InputSpec is not read beyond its type: Input<0>'s shape
// is a Shape<0>, whose own assertion would be a second error.
template <class InputSpec>
inline constexpr bool is_input = false;
template <std::size_t... Dims>
inline constexpr bool is_input<Input<Dims...>> = true;
template <class InputSpec>
inline constexpr bool input_extents_positive = false;
template <std::size_t... Dims>
inline constexpr bool input_extents_positive<Input<Dims...>> = sizeof...(Dims) >= 1 && ((Dims > 0) && ...);

template <class InputSpec, std::size_t NumLayers>
constexpr bool chain_binds() {
    if constexpr (!is_input<InputSpec>) {
        static_assert(is_input<InputSpec>,
                      "the first argument of chainlet::Chain must be chainlet::Input<dims...>, e.g. Input<28, 28, 1>");
        return false;
    } else if constexpr (!input_extents_positive<InputSpec>) {
        static_assert(input_extents_positive<InputSpec>,
                      "chainlet::Input<dims...>: at least one extent, and every extent positive");
        return false;
    } else {
        static_assert(NumLayers >= 1, "a Chain needs at least one layer after its Input");
        return NumLayers >= 1;
    }
}

template <class InputSpec, class... Layers>
struct chain_sequence {
    using type = stand_in_sequence;
};
template <std::size_t... Dims, class... Layers>
    requires(chain_binds<Input<Dims...>, sizeof...(Layers)>())
struct chain_sequence<Input<Dims...>, Layers...> {
    using type = Sequence<Shape<Dims...>, Layers...>;
};

}  // namespace detail

// The network a user trains: its layers bound to the input shape, plus the text of its input. A first
// argument that is not Input<dims...>, an extent 0 or no layer is one error (detail::chain_binds), and
// the chain a stand-in.
template <class InputSpec, class... Layers>
struct Chain : detail::stand_in_sequence {
    static_assert(!detail::chain_binds<InputSpec, sizeof...(Layers)>());  // which asserts what is wrong
    using sequence = detail::stand_in_sequence;
};

template <std::size_t... Dims, class... Layers>
struct Chain<Input<Dims...>, Layers...> : detail::chain_sequence<Input<Dims...>, Layers...>::type {
    using sequence = typename detail::chain_sequence<Input<Dims...>, Layers...>::type;
    // the sequence's rules, for the chain as a bound layer (check_bound_layer<Chain<...>>)
    using jet_rule = detail::SequenceJetRule<sequence, Chain>;
    using hvp_rule = detail::SequenceHvpRule<sequence, Chain>;

    // e.g. "Input[28,28,1] Conv[5x5,6,relu,valid] MaxPool[2x2] Flatten Dense[10,identity]"
    static std::string describe() {
        std::string s = "Input[";
        s.append(detail::join_dims({Dims...}, ",")).append("] ").append(sequence::describe());
        return s;
    }
};

}  // namespace chainlet
