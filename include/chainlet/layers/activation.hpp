// ActivationLayer<Act>: y = Act(x) element by element, on a sample of any shape (after a normalisation,
// between containers, or anywhere a fused activation is not available). No parameters.
//
// Pullback: dx = dy * Act'(x), with Act' from the output y or from the input x (activations.hpp).
//
// The name: `Activation` is already the concept that Dense, Conv and every layer with a fused
// activation constrain their `Act` with (activations.hpp); a class template cannot share it, and
// renaming the concept would change every layer's signature, so the standalone layer is ActivationLayer.
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
#include "chainlet/kernels/simd.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

template <Activation Act>
struct ActivationLayer {
    using activation = Act;

    template <class InShape>
    struct bound {
        using layer_type = ActivationLayer;  // for passes with their own rules (derivatives/taylor.hpp)
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

}  // namespace chainlet
