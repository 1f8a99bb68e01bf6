// Chain<Input<...>, Layers...>: threads the sample shape through the layers at compile time, so the
// parameter count, every layer's offset into the flat parameter buffer, and every activation size are
// constants. A layer type L is "bound" to its input shape as L::bound<InShape>, which provides:
//
//   in_size, out_size, out_shape, num_params, aux_per_sample       (compile-time constants)
//   init(span<T> p, Rng&, InitKind)                                   fills its slice of the parameters
//   forward(p, x, y, aux, n)                                          x: in_size x n, y: out_size x n
//   pullback(p, g, x, y, aux, dy, dx, n)                              adds into g, dy may be clobbered,
//                                                                      dx (may be null) is overwritten
//
// All activations are feature-major within a chunk of n samples: element f of sample s is at [f * n + s].
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <tuple>
#include <utility>

#include "chainlet/init.hpp"
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

template <class InShape, class L, class... Rest>
struct bind_all<InShape, L, Rest...> {
    using bound = typename L::template bound<InShape>;
    using next = bind_all<typename bound::out_shape, Rest...>;
    using type = decltype(std::tuple_cat(std::declval<std::tuple<bound>>(), std::declval<typename next::type>()));
    using out_shape = typename next::out_shape;
};

}  // namespace detail

template <class InputSpec, class... Layers>
struct Chain {
    static_assert(sizeof(InputSpec) == 0,
                  "the first argument of chainlet::Chain must be chainlet::Input<dims...>, e.g. Input<28, 28, 1>");
};

template <std::size_t... Dims, class... Layers>
struct Chain<Input<Dims...>, Layers...> {
    static_assert(sizeof...(Layers) >= 1, "a Chain needs at least one layer after its Input");

    using in_shape = Shape<Dims...>;
    using layers = typename detail::bind_all<in_shape, Layers...>::type;
    using out_shape = typename detail::bind_all<in_shape, Layers...>::out_shape;
    template <std::size_t I>
    using layer = std::tuple_element_t<I, layers>;

    static constexpr std::size_t num_layers = sizeof...(Layers);
    static constexpr std::size_t in_size = in_shape::size;
    static constexpr std::size_t out_size = out_shape::size;

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
    static constexpr auto layer_aux = per_layer([](auto* l) { return std::remove_pointer_t<decltype(l)>::aux_per_sample; }, seq);
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
    static constexpr std::size_t max_width = [] {
        std::size_t m = 0;
        for (auto w : width) m = w > m ? w : m;
        return m;
    }();

    // Fills p with Glorot weights and zero biases; layer i draws from its own stream, so inserting a
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

    // act[i] holds the input of layer i (act[0] the chain's input, act[num_layers] its output),
    // aux[i] the layer's extra storage; all for a chunk of n samples.
    template <class T>
    static void forward(const T* p, T* const* act, T* const* aux, std::size_t n) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (layer<I>::forward(p + param_offset[I], act[I], act[I + 1], aux[I], n), ...);
        }(seq);
    }

    // Pulls the output cotangent in buf[0] back through every layer, adding parameter gradients into g.
    // buf[0] and buf[1] are ping-pong buffers of max_width * n; the input cotangent, if want_dx, ends in
    // the returned buffer, otherwise the first layer skips it.
    template <class T>
    static T* pullback(const T* p, T* g, T* const* act, T* const* aux, T* buf0, T* buf1, std::size_t n, bool want_dx) {
        T* cur = buf0;
        T* other = buf1;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (([&] {
                 constexpr std::size_t L = num_layers - 1 - I;
                 T* dx = (L > 0 || want_dx) ? other : nullptr;
                 layer<L>::pullback(p + param_offset[L], g + param_offset[L], act[L], act[L + 1], aux[L], cur, dx, n);
                 std::swap(cur, other);
             }()),
             ...);
        }(seq);
        return cur;
    }
};

}  // namespace chainlet
