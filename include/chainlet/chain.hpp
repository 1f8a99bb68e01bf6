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
// own[0], ...}; the last entry is where they end. Training's saved storage and the derivative passes'
// are laid out by it.
template <std::size_t L>
constexpr std::array<std::size_t, L + 1> blocks_after(std::size_t first, const std::array<std::size_t, L>& own) {
    std::array<std::size_t, L + 1> o{};
    o[0] = first;
    for (std::size_t i = 0; i < L; ++i) o[i + 1] = o[i] + own[i];
    return o;
}

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

private:
    template <class F, std::size_t... I>
    static constexpr auto per_layer(F f, std::index_sequence<I...>) {
        return std::array<std::size_t, num_layers>{f(static_cast<layer<I>*>(nullptr))...};
    }
    static constexpr auto seq = std::make_index_sequence<num_layers>{};
    static constexpr std::array<std::size_t, num_layers + 1> prefix(std::array<std::size_t, num_layers> a) {
        std::array<std::size_t, num_layers + 1> r{};
        for (std::size_t i = 0; i < num_layers; ++i) r[i + 1] = r[i] + a[i];
        return r;
    }

public:
    static constexpr auto layer_params = per_layer([](auto* l) { return std::remove_pointer_t<decltype(l)>::num_params; }, seq);
    static constexpr auto layer_saved = per_layer([](auto* l) { return std::remove_pointer_t<decltype(l)>::saved_per_sample; }, seq);
    static constexpr auto layer_scratch = per_layer([](auto* l) { return std::remove_pointer_t<decltype(l)>::scratch_per_sample; }, seq);
    // param_offset[i]: where layer i's parameters start; param_offset[num_layers] == num_params.
    static constexpr auto param_offset = prefix(layer_params);
    static constexpr std::size_t num_params = param_offset[num_layers];
    // width[i]: features per sample entering layer i; width[num_layers] == out_size.
    static constexpr auto width = [] {
        std::array<std::size_t, num_layers + 1> w{};
        w[0] = in_size;
        const auto outs = per_layer([](auto* l) { return std::remove_pointer_t<decltype(l)>::out_size; }, seq);
        for (std::size_t i = 0; i < num_layers; ++i) w[i + 1] = outs[i];
        return w;
    }();
    static constexpr std::size_t max_width = *std::max_element(width.begin(), width.end());

    // Saved storage per sample: the inner activations width[1 .. num_layers - 1] (act_offset[i] is
    // where the input of layer i starts, for i >= 1), then every layer's saved storage (saved_offset[i]).
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
    static constexpr auto saved_offset = blocks_after(inner_width_sum, layer_saved);
    static constexpr std::size_t saved_per_sample = saved_offset[num_layers];
    // Scratch per sample: two cotangent buffers for the inner boundaries (one when there is only one
    // inner boundary, none for a single layer), then the largest scratch of a layer (they run one at a time).
    static constexpr std::size_t max_inner_width = [] {
        std::size_t m = 0;
        for (std::size_t i = 1; i < num_layers; ++i) m = std::max(m, width[i]);
        return m;
    }();
    static constexpr std::size_t cotangent_buffers = num_layers >= 3 ? 2 : num_layers - 1;
    static constexpr std::size_t layer_scratch_offset = cotangent_buffers * max_inner_width;
    static constexpr std::size_t scratch_per_sample =
        layer_scratch_offset + *std::max_element(layer_scratch.begin(), layer_scratch.end());

    // Fills p with each layer's initial values; layer i draws from its own stream, so inserting a
    // layer does not change the draws of the layers before it.
    template <class T>
    static void init(std::span<T> p, std::uint64_t seed, InitKind kind) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (([&] {
                 Rng rng(seed * 0x9E3779B97F4A7C15ull + I + 1);
                 layer<I>::init(p.subspan(param_offset[I], layer_params[I]), rng, kind);
             }()),
             ...);
        }(seq);
    }
    // As a layer inside a container: the container's stream seeds the chain's.
    template <class T>
    static void init(std::span<T> p, Rng& rng, InitKind kind) {
        init(p, rng.next(), kind);
    }

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n, const Pass& pass = {}) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (layer_forward<layer<I>>(p + param_offset[I], input<I>(x, saved, n), output<I>(y, saved, n),
                                     saved + saved_offset[I] * n, n, substream(pass, I)),
             ...);
        }(seq);
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
        if constexpr (I == 0) return x;
        else return saved + act_offset[I] * n;
    }
    template <std::size_t I, class T>
    static T* output(T* y, T* saved, std::size_t n) {
        if constexpr (I + 1 == num_layers) return y;
        else return saved + act_offset[I + 1] * n;
    }

    // Metadata (layer_metadata.hpp): "Dense[32,tanh] Dense[1,identity]" and the layers' tensors.
    static std::string describe() {
        std::string s;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            ((s.append(I ? " " : "").append(describe_layer<I>())), ...);
        }(seq);
        return s;
    }
    static void torch_layout(TorchModules& m, std::size_t offset) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (torch_layer<I>(m, offset + param_offset[I]), ...);
        }(seq);
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
            T* const layer_scratch_ptr = scratch + layer_scratch_offset * n;
            // The cotangent of layer I's output: dy for the last layer, else buffer (I % 2).
            auto cotangent = [&](std::size_t I) {
                return I == num_layers - 1 ? dy : scratch + (I % 2) * max_inner_width * n;
            };
            T* dyl = cotangent(L);
            T* dxl = L == 0 ? dx : cotangent(L - 1);
            const T* xl = input<L>(x, saved, n);
            T* yl = output<L>(const_cast<T*>(y), saved, n);
            if constexpr (pulls_back_next<L, T>()) {
                using next = layer<L + 1>;
                const T* next_y = output<L + 1>(const_cast<T*>(y), saved, n);
                const T* next_dy = cotangent(L + 1);
                auto rows = [&](std::size_t r0, std::size_t r1, T* out) {
                    next::cotangent_rows(static_cast<const T*>(yl), next_y, next_dy, out, r0, r1, n);
                };
                if constexpr (!accumulate) std::fill_n(g + param_offset[L], layer_params[L], T(0));
                layer<L>::pullback_from_rows(p + param_offset[L], g + param_offset[L], xl, yl,
                                             saved + saved_offset[L] * n, layer_scratch_ptr, dyl, dxl, n, rows,
                                             std::size_t{next::cotangent_row_block});
            } else {
                detail::layer_pullback<accumulate, layer<L>>(p + param_offset[L], g + param_offset[L], xl, yl,
                                                             saved + saved_offset[L] * n, layer_scratch_ptr, dyl, dxl, n);
            }
        }
    }

private:
    template <bool accumulate, class T>
    static void pullback_layers(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                                std::size_t n) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (pullback_layer<num_layers - 1 - I, accumulate>(p, g, x, y, saved, scratch, dy, dx, n), ...);
        }(seq);
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
// branch's): the layers' rules one after the other, in the layout of training's storage (above).
// Input derivatives: saved holds the inner activations (act_offset, each feature C columns), then every
// layer's saved block; scratch two ping-pong cotangent buffers, then the largest layer scratch.
template <class S, class Layer>
struct SequenceJetRule {
    using layer = Layer;
    static constexpr std::size_t L = S::num_layers;
    template <std::size_t I>
    using rule = jet_rule_of<typename S::template layer<I>>;
    static constexpr bool available = []<std::size_t... I>(std::index_sequence<I...>) {
        return (rule_available<rule<I>>() && ...);
    }(std::make_index_sequence<L>{});
    static constexpr std::array<std::size_t, L + 1> saved_offset = []<std::size_t... I>(std::index_sequence<I...>) {
        return blocks_after<L>(S::inner_width_sum, {rule<I>::saved...});
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

// The R-operator: saved holds a and Ra at every inner boundary (act_offset, then the same again for Ra),
// then every layer's saved block; scratch the ping-pong cotangents (bar 0, bar 1, R bar 0, R bar 1), then
// the largest layer scratch.
template <class S, class Layer>
struct SequenceHvpRule {
    using layer = Layer;
    static constexpr std::size_t L = S::num_layers, W = S::max_inner_width;
    template <std::size_t I>
    using rule = hvp_rule_of<typename S::template layer<I>>;
    static constexpr bool available = []<std::size_t... I>(std::index_sequence<I...>) {
        return (rule_available<rule<I>>() && ...);
    }(std::make_index_sequence<L>{});
    static constexpr std::array<std::size_t, L + 1> saved_offset = []<std::size_t... I>(std::index_sequence<I...>) {
        return blocks_after<L>(2 * S::inner_width_sum, {rule<I>::saved...});
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
