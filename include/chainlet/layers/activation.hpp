// ActivationLayer<Act>: y = Act(x) element by element, on a sample of any shape (after a normalisation,
// between containers, or anywhere a fused activation is not available). No parameters.
//
// Pullback: dx = dy * Act'(x), with Act' from the output y or from the input x (activations.hpp).
//
// The name: `Activation` is already the concept that Dense, Conv and every layer with a fused
// activation constrain their `Act` with (activations.hpp); a class template cannot share it, and
// renaming the concept would change every layer's signature, so the standalone layer is ActivationLayer.
//
// In the derivative passes (jet_rule, hvp_rule; layer.hpp), below the layer.
//
// PyTorch: the activation's module (nn.Tanh(), nn.ELU(), nn.LeakyReLU(0.01), nn.SiLU(), nn.GELU(),
// nn.GELU(approximate="tanh"), nn.Softplus(), nn.Sigmoid(), nn.ReLU(), nn.Identity()); it takes one
// module index and keeps the feature order.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "chainlet/activations.hpp"
#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/kernels/vector_loop.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

namespace detail {
template <class A, class B>
struct ActivationLayerJetRule;
template <class A, class B>
struct ActivationLayerHvpRule;
}  // namespace detail

template <Activation Act>
struct ActivationLayer {
    using activation = Act;

    template <class InShape>
    struct bound {
        using layer_type = ActivationLayer;
        using jet_rule = detail::ActivationLayerJetRule<Act, bound>;  // the derivative passes' rules (below)
        using hvp_rule = detail::ActivationLayerHvpRule<Act, bound>;
        static constexpr std::size_t in_size = InShape::size;
        static constexpr std::size_t out_size = InShape::size;
        using out_shape = InShape;
        static constexpr std::size_t num_params = 0;
        static constexpr std::size_t saved_per_sample = 0, scratch_per_sample = 0;

        template <class T>
        static void init(std::span<T>, Rng&, InitKind) {}

        template <class T>
        static void forward(const T*, const T* x, T* y, T*, std::size_t n) {
            const std::size_t m = in_size * n;
            std::size_t i = 0;
            if constexpr (simd::enabled) {
                using V = simd::vec<T>;
                for (const std::size_t end = m - m % simd::width<T>; i < end; i += simd::width<T>)
                    simd::storev(y + i, Act::value(simd::loadv<V>(x + i)));
            }
            for (; i < m; ++i) y[i] = Act::value(x[i]);
        }

        template <class T>
        static void pullback(const T*, T*, const T* x, const T* y, T*, T*, T* dy, T* dx, std::size_t n) {
            if (!dx) return;
            const T* s = Act::derivative_from_output ? y : x;
            const std::size_t m = in_size * n;
            std::size_t i = 0;
            if constexpr (simd::enabled) {
                using V = simd::vec<T>;
                for (const std::size_t end = m - m % simd::width<T>; i < end; i += simd::width<T>)
                    simd::storev(dx + i, Act::pullback(simd::loadv<V>(dy + i), simd::loadv<V>(s + i)));
            }
            for (; i < m; ++i) dx[i] = Act::pullback(dy[i], s[i]);
        }

        static std::string describe() { return std::string("Activation[") + Act::name + "]"; }
        static void torch_layout(TorchModules& m, std::size_t) { m.skip_module(); }
    };
};

namespace detail {

// Input derivatives (jet.hpp): the activation's rule on the columns with z = x (the layer's input, kept
// by the caller). Pullback: xbar = that rule's pullback of ybar (computed in xbar); nothing without xbar.
template <class A, class B>
struct ActivationLayerJetRule {
    using layer = B;
    static constexpr std::size_t F = B::in_size;
    static constexpr std::size_t saved = 0, scratch = 0;
    // (layer.hpp) false without a jet: a pass fails to compile then (checked_jet)
    static constexpr bool available = JetActivation<A>;
    template <class T>
    static void forward(const T*, const T* x, T* y, T*, std::size_t m, const JetColumns& cols) {
        using Act = jet_activation<A, B>;
        ActivationJetRule<Act, T>::template forward<false>(x, y, F, m, cols.D, cols.second);
    }
    template <class T>
    static void pullback(const T*, T*, const T* x, const T*, T*, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        using Act = jet_activation<A, B>;
        if (!xbar) return;
        std::copy_n(ybar, F * cols.C * m, xbar);
        ActivationJetRule<Act, T>::template pullback<false>(x, xbar, F, m, cols.D, cols.second, cols.containing);
    }
};

// The R-operator (derivatives/hvp.hpp), y = f(x):  Ry = f'(x) Rx;  xbar = ybar f'(x),
// R xbar = R ybar f'(x) + ybar f''(x) Rx.
template <class A, class B>
struct ActivationLayerHvpRule {
    using layer = B;
    static constexpr std::size_t F = B::in_size;
    static constexpr std::size_t saved = 0, scratch = 0;
    // (layer.hpp) false without a jet: a pass fails to compile then (checked_jet)
    static constexpr bool available = JetActivation<A>;
    template <class T>
    static void forward(const T*, const T*, const T* x, const T* rx, T* y, T* ry, T*, std::size_t m) {
        using Act = jet_activation<A, B>;
        kernels::vectors_then_scalars<T>(F * m, [&]<class V>(std::size_t k) {
            const Jet<V> j = Act::jet(simd::loadv<V>(x + k));
            simd::storev(y + k, j.value);
            simd::storev(ry + k, rx ? j.d1 * simd::loadv<V>(rx + k) : V(0));
        });
    }
    template <class T>
    static void pullback(const T*, const T*, T*, T*, const T* x, const T* rx, const T*, T*, T* ybar, T* rybar,
                         T* xbar, T* rxbar, std::size_t m) {
        using Act = jet_activation<A, B>;
        if (!xbar) return;
        kernels::vectors_then_scalars<T>(F * m, [&]<class V>(std::size_t k) {
            const Jet<V> j = Act::jet(simd::loadv<V>(x + k));
            const V ab = simd::loadv<V>(ybar + k), rab = simd::loadv<V>(rybar + k);
            simd::storev(xbar + k, ab * j.d1);
            simd::storev(rxbar + k, rx ? simd::fma(rab, j.d1, ab * j.d2 * simd::loadv<V>(rx + k)) : rab * j.d1);
        });
    }
};

}  // namespace detail

}  // namespace chainlet
