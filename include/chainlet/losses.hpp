// Losses. The training loss of a batch is the mean over its samples of a per-sample loss l_s.
//
// A loss type (built-in or the user's own) provides:
//
//   template <class T> using target = ...;                 element type of the targets
//   static constexpr std::size_t targets_per_sample(std::size_t out);
//   template <class T> static void check_targets(std::span<const target<T>> y, std::size_t out);
//        throws std::invalid_argument for targets the loss cannot take (e.g. a label out of range)
//   template <class T> static T value_and_gradient(const T* yhat, const target<T>* y, T* dyhat,
//                                                  std::size_t out, std::size_t n, T scale);
//        yhat (out x n) and y (targets_per_sample x n) are feature-major chunks: element f of
//        sample s at [f * n + s]. Returns sum_s l_s and writes dyhat = scale * dl_s/dyhat.
//
// The user passes targets sample-major (one row per sample, as for the inputs); the library
// transposes each chunk before calling the loss. The concept chainlet::Loss checks the interface.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "chainlet/kernels/simd.hpp"

namespace chainlet {

// l_s = sum_o (yhat_o - y_o)^2
struct SquaredError {
    template <class T>
    using target = T;
    static constexpr std::size_t targets_per_sample(std::size_t out) { return out; }
    template <class T>
    static void check_targets(std::span<const T>, std::size_t) {}
    template <class T>
    static T value_and_gradient(const T* yhat, const T* y, T* dyhat, std::size_t out, std::size_t n, T scale) {
        using V = simd::vec<T>;
        constexpr std::size_t W = simd::width<T>;
        const std::size_t len = out * n;
        std::size_t i = 0;
        T sum = 0;
        if constexpr (simd::enabled) {
            // four sums, vector i in sum i mod 4: one would wait an FMA's latency per vector
            V acc[4] = {V(T(0)), V(T(0)), V(T(0)), V(T(0))};
            const V two_scale(2 * scale);
            auto add = [&](int u) __attribute__((always_inline)) {
                const V d = V::load_unaligned(yhat + i) - V::load_unaligned(y + i);
                acc[u] = simd::fma(d, d, acc[u]);
                (two_scale * d).store_unaligned(dyhat + i);
                i += W;
            };
            const std::size_t vectors_end = len - len % W;
            while (i + 4 * W <= vectors_end)
                for (int u = 0; u < 4; ++u) add(u);
            for (int u = 0; u < 3; ++u)
                if (i < vectors_end) add(u);
            sum = simd::hsum<T>((acc[0] + acc[1]) + (acc[2] + acc[3]));
        }
        for (; i < len; ++i) {
            const T d = yhat[i] - y[i];
            sum += d * d;
            dyhat[i] = 2 * scale * d;
        }
        return sum;
    }
};

// l_s = sum_o |yhat_o - y_o|; the derivative at 0 is taken as 0.
struct AbsoluteError {
    template <class T>
    using target = T;
    static constexpr std::size_t targets_per_sample(std::size_t out) { return out; }
    template <class T>
    static void check_targets(std::span<const T>, std::size_t) {}
    template <class T>
    static T value_and_gradient(const T* yhat, const T* y, T* dyhat, std::size_t out, std::size_t n, T scale) {
        T sum = 0;
        for (std::size_t i = 0; i < out * n; ++i) {
            const T d = yhat[i] - y[i];
            sum += std::abs(d);
            dyhat[i] = d > 0 ? scale : d < 0 ? -scale : T(0);
        }
        return sum;
    }
};

// Softmax cross-entropy on integer class labels in [0, out):
//   l_s = logsumexp(yhat_s) - yhat_s[label_s],   dl_s/dyhat_s = softmax(yhat_s) - onehot(label_s).
// Vectorised across the samples of the chunk (the feature-major layout puts them side by side).
struct SoftmaxCrossEntropy {
    template <class T>
    using target = std::int32_t;
    static constexpr std::size_t targets_per_sample(std::size_t) { return 1; }
    template <class T>
    static void check_targets(std::span<const std::int32_t> y, std::size_t out) {
        for (std::size_t s = 0; s < y.size(); ++s)
            if (y[s] < 0 || static_cast<std::size_t>(y[s]) >= out)
                throw std::invalid_argument("SoftmaxCrossEntropy: label " + std::to_string(y[s]) + " of sample " +
                                            std::to_string(s) + " is outside [0, " + std::to_string(out) + ")");
    }
    template <class T>
    static T value_and_gradient(const T* yhat, const std::int32_t* y, T* dyhat, std::size_t out, std::size_t n,
                                T scale) {
        using V = simd::vec<T>;
        constexpr std::size_t W = simd::width<T>;
        std::size_t s = 0;
        T sum = 0;
        // Per sample group: m = max_o yhat, e_o = exp(yhat_o - m), Z = sum_o e_o,
        // l = log Z + m - yhat[label], dyhat_o = scale * (e_o / Z - [o == label]).
        auto group = [&]<class VV>(std::size_t s0) {
            VV m = simd::loadv<VV>(yhat + s0);
            for (std::size_t o = 1; o < out; ++o) m = simd::max(m, simd::loadv<VV>(yhat + o * n + s0));
            VV z(T(0));
            for (std::size_t o = 0; o < out; ++o) {
                const VV e = simd::exp(simd::loadv<VV>(yhat + o * n + s0) - m);
                simd::storev(dyhat + o * n + s0, e);
                z += e;
            }
            const VV r = VV(scale) / z;
            for (std::size_t o = 0; o < out; ++o)
                simd::storev(dyhat + o * n + s0, simd::loadv<VV>(dyhat + o * n + s0) * r);
            T lz[W], mm[W];
            simd::storev(lz, z);
            simd::storev(mm, m);
            for (std::size_t j = 0; j < simd::lanes<VV>; ++j) {
                const std::size_t t = s0 + j;
                const std::size_t label = static_cast<std::size_t>(y[t]);
                sum += std::log(lz[j]) + mm[j] - yhat[label * n + t];
                dyhat[label * n + t] -= scale;
            }
        };
        if constexpr (simd::enabled)
            for (const std::size_t s_end = n - n % (W); s < s_end; s += W) group.template operator()<V>(s);
        for (; s < n; ++s) group.template operator()<T>(s);
        return sum;
    }

};

template <class L, class T>
concept Loss = requires(const T* yhat, const typename L::template target<T>* y, T* dy, std::size_t k, T scale,
                        std::span<const typename L::template target<T>> ys) {
    { L::targets_per_sample(k) } -> std::convertible_to<std::size_t>;
    L::template check_targets<T>(ys, k);
    { L::template value_and_gradient<T>(yhat, y, dy, k, k, scale) } -> std::convertible_to<T>;
};

}  // namespace chainlet
