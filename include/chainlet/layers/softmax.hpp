// Softmax: y_k = e^(x_k) / sum_j e^(x_j) over the features of a flat sample; a final layer for
// predicting class probabilities. No parameters.
//
// Pullback: dx_k = y_k (dy_k - sum_j dy_j y_j).
//
// With SoftmaxCrossEntropy: that loss takes raw logits and applies the softmax itself (it is then
// exact and stable, its gradient softmax - onehot). Train the chain *without* Softmax, and predict
// probabilities with the same chain followed by Softmax: Softmax has no parameters, so both chains
// use the same parameter buffer. Training through Softmax into SoftmaxCrossEntropy would apply the
// softmax twice; value_and_gradient and fit refuse that combination at compile time.
//
// PyTorch: nn.Softmax(dim=1); one module index, feature order kept.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "chainlet/init.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

struct Softmax {
    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(InShape::rank == 1,
                          "Softmax needs a flat input (the class scores of a sample): put Flatten before it");
            return InShape::rank != 1;
        }();
        static constexpr std::size_t in_size = InShape::size;
        static constexpr std::size_t out_size = InShape::size;
        using out_shape = InShape;
        static constexpr std::size_t num_params = 0;
        static constexpr std::size_t saved_per_sample = 0, scratch_per_sample = 0;
        static constexpr bool outputs_probabilities = true;  // see the SoftmaxCrossEntropy check in train.hpp

        template <class T>
        static void init(std::span<T>, Rng&, InitKind) {}

        // Features are feature-major, [k * n + s]: the vectors run along the samples, lanes s .. s + lanes.
        template <class V, class T>
        static void forward_lanes(const T* x, T* y, std::size_t n, std::size_t s) {
            V mx = simd::loadv<V>(x + s);
            for (std::size_t k = 1; k < in_size; ++k) mx = simd::max(mx, simd::loadv<V>(x + k * n + s));
            V sum(T(0));
            for (std::size_t k = 0; k < in_size; ++k) {
                const V e = simd::exp(simd::loadv<V>(x + k * n + s) - mx);
                simd::storev(y + k * n + s, e);
                sum += e;
            }
            const V inv = V(T(1)) / sum;
            for (std::size_t k = 0; k < in_size; ++k) simd::storev(y + k * n + s, simd::loadv<V>(y + k * n + s) * inv);
        }
        template <class V, class T>
        static void pullback_lanes(const T* y, const T* dy, T* dx, std::size_t n, std::size_t s) {
            V dot(T(0));
            for (std::size_t k = 0; k < in_size; ++k) dot = simd::fma(simd::loadv<V>(dy + k * n + s), simd::loadv<V>(y + k * n + s), dot);
            for (std::size_t k = 0; k < in_size; ++k)
                simd::storev(dx + k * n + s, simd::loadv<V>(y + k * n + s) * (simd::loadv<V>(dy + k * n + s) - dot));
        }

        template <class T>
        static void forward(const T*, const T* x, T* y, T*, std::size_t n) {
            std::size_t s = 0;
            if constexpr (simd::enabled)
                for (; s + simd::width<T> <= n; s += simd::width<T>) forward_lanes<simd::vec<T>>(x, y, n, s);
            for (; s < n; ++s) forward_lanes<T>(x, y, n, s);
        }

        template <class T>
        static void pullback(const T*, T*, const T*, const T* y, T*, T*, T* dy, T* dx, std::size_t n) {
            if (!dx) return;
            std::size_t s = 0;
            if constexpr (simd::enabled)
                for (; s + simd::width<T> <= n; s += simd::width<T>) pullback_lanes<simd::vec<T>>(y, dy, dx, n, s);
            for (; s < n; ++s) pullback_lanes<T>(y, dy, dx, n, s);
        }

        static std::string describe() { return "Softmax"; }
        static void torch_layout(TorchModules& m, std::size_t) { m.skip_module(); }
    };
};

}  // namespace chainlet
