// Softmax: y_k = e^(x_k) / sum_j e^(x_j) over the features of a flat sample; a final layer for
// predicting class probabilities. No parameters.
//
// Pullback: dx_k = y_k (dy_k - sum_j dy_j y_j).
//
// In the derivative passes (jet_rule, hvp_rule; layer.hpp), below the layer. With <u, v> = sum_k u_k v_k,
// the Jacobian is the symmetric M(y) = diag(y) - y y^T, M(y) v = y (v - <y, v>), and along u the
// derivative of y' = M(y) u is  y'' = y' (u - <y, u>) - y <y', u>.
//
// With SoftmaxCrossEntropy: that loss takes raw logits and applies the softmax itself (it is then
// exact and stable, its gradient softmax - onehot). Train the chain *without* Softmax, and predict
// probabilities with the same chain followed by Softmax: Softmax has no parameters, so both chains
// use the same parameter buffer. Training through Softmax into SoftmaxCrossEntropy would apply the
// softmax twice; value_and_gradient and fit refuse that combination at compile time.
//
// PyTorch: nn.Softmax(dim=1); one module index, feature order kept.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>

#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

namespace detail {
template <class B>
struct SoftmaxJetRule;
template <class B>
struct SoftmaxHvpRule;
}  // namespace detail

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
        using jet_rule = detail::SoftmaxJetRule<bound>;  // the derivative passes' rules (below)
        using hvp_rule = detail::SoftmaxHvpRule<bound>;

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

namespace detail {

// One sample's features in the rules' layouts: feature k of column c at base[k * stride + c * m].
template <class T>
struct SoftmaxSample {
    std::size_t K, stride, m;
    T& at(T* u, std::size_t k, std::size_t c) const { return u[k * stride + c * m]; }
    T at(const T* u, std::size_t k, std::size_t c) const { return u[k * stride + c * m]; }
    T dot(const T* u, std::size_t cu, const T* v, std::size_t cv) const {  // <u_cu, v_cv>
        T t = 0;
        for (std::size_t k = 0; k < K; ++k) t += at(u, k, cu) * at(v, k, cv);
        return t;
    }
    // out_co = M(y_0) v_cv = y_0 (v_cv - <y_0, v_cv>)  (out may be v, in place)
    void jacobian(const T* y, const T* v, std::size_t cv, T* out, std::size_t co) const {
        const T c = dot(y, 0, v, cv);
        for (std::size_t k = 0; k < K; ++k) at(out, k, co) = at(y, k, 0) * (at(v, k, cv) - c);
    }
    // ybar_0 += the derivative of <g, M(y_0) v> in y_0:  g v - g <y_0, v> - v <g, y_0>
    void add_jacobian_y(const T* y, const T* g, std::size_t cg, const T* v, std::size_t cv, T* ybar) const {
        const T yv = dot(y, 0, v, cv), gy = dot(g, cg, y, 0);
        for (std::size_t k = 0; k < K; ++k)
            at(ybar, k, 0) += at(g, k, cg) * (at(v, k, cv) - yv) - at(v, k, cv) * gy;
    }
    void softmax(const T* a, T* y) const {  // column 0
        T mx = at(a, 0, 0), sum = 0;
        for (std::size_t k = 1; k < K; ++k) mx = std::max(mx, at(a, k, 0));
        for (std::size_t k = 0; k < K; ++k) sum += (at(y, k, 0) = std::exp(at(a, k, 0) - mx));
        for (std::size_t k = 0; k < K; ++k) at(y, k, 0) /= sum;
    }
};

// Input derivatives (jet.hpp's columns): y_0 = softmax(a_0), y_c = M(y_0) a_c for every other column, and
// y_S += sum_{i in S} T_i with T_i = y_i (a_i - <y_0, a_i>) - y_0 <y_i, a_i>. Pullback, from the second
// columns to the tangents to the value (ybar accumulates the cotangents of y_i and y_0 in place):
//   abar_S = M(y_0) ybar_S;  through T_i with g = ybar_S: ybar_i += g (a_i - <y_0, a_i>) - a_i <g, y_0>,
//   abar_i += g y_i - y_0 <g, y_i> - y_i <g, y_0>,  ybar_0 -= a_i <g, y_i> + g <y_i, a_i>;
//   abar_i += M(y_0) ybar_i;  ybar_0 += the y_0-derivative of <g, M(y_0) a> for every column's g and a;
//   abar_0 = M(y_0) ybar_0.
// Saved: y in every column.
template <class B>
struct SoftmaxJetRule {
    using layer = B;
    static constexpr std::size_t K = B::in_size;
    static constexpr std::size_t saved = K, scratch = 0;
    static constexpr bool available = true;

    template <class T>
    static void forward(const T*, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        const std::size_t C = cols.C, D = cols.D, N = C * m;
        for (std::size_t s = 0; s < m; ++s) {
            const SoftmaxSample<T> one{K, N, m};
            const T* a = x + s;
            T* h = sv + s;
            one.softmax(a, h);
            for (std::size_t c = 1; c < C; ++c) one.jacobian(h, a, c, h, c);
            for (std::size_t k = 0; k < cols.second.size(); ++k) {
                const std::size_t cs = 1 + D + k;
                for (std::size_t i : cols.second[k]) {
                    const T ci = one.dot(h, 0, a, 1 + i), qi = one.dot(h, 1 + i, a, 1 + i);
                    for (std::size_t f = 0; f < K; ++f)
                        one.at(h, f, cs) += one.at(h, f, 1 + i) * (one.at(a, f, 1 + i) - ci) - one.at(h, f, 0) * qi;
                }
            }
        }
        std::copy_n(sv, K * N, y);
    }

    template <class T>
    static void pullback(const T*, T*, const T* x, const T* sv, T*, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        if (!xbar) return;
        const std::size_t C = cols.C, D = cols.D, N = C * m;
        for (std::size_t s = 0; s < m; ++s) {
            const SoftmaxSample<T> one{K, N, m};
            const T *a = x + s, *h = sv + s;
            T *yb = ybar + s, *ab = xbar + s;
            for (std::size_t c = 1; c < C; ++c)
                for (std::size_t f = 0; f < K; ++f) one.at(ab, f, c) = 0;
            for (std::size_t k = 0; k < cols.second.size(); ++k) {
                const std::size_t cs = 1 + D + k;
                const T gy = one.dot(yb, cs, h, 0);
                for (std::size_t i : cols.second[k]) {
                    const std::size_t ci = 1 + i;
                    const T ya = one.dot(h, 0, a, ci), gyi = one.dot(yb, cs, h, ci), yia = one.dot(h, ci, a, ci);
                    for (std::size_t f = 0; f < K; ++f) {
                        const T g = one.at(yb, f, cs);
                        one.at(yb, f, ci) += g * (one.at(a, f, ci) - ya) - one.at(a, f, ci) * gy;
                        one.at(ab, f, ci) += g * one.at(h, f, ci) - one.at(h, f, 0) * gyi - one.at(h, f, ci) * gy;
                        one.at(yb, f, 0) -= one.at(a, f, ci) * gyi + g * yia;
                    }
                }
            }
            for (std::size_t c = 1; c < C; ++c) {  // the first-order part of every column
                one.add_jacobian_y(h, yb, c, a, c, yb);
                const T cg = one.dot(h, 0, yb, c);
                for (std::size_t f = 0; f < K; ++f) one.at(ab, f, c) += one.at(h, f, 0) * (one.at(yb, f, c) - cg);
            }
            one.jacobian(h, yb, 0, ab, 0);
        }
    }
};

// The R-operator (derivatives/hvp.hpp): Ry = M(y) Rx. Pullback: xbar = M(y) ybar and
//   R xbar = M(y) R ybar + Ry ybar - Ry <y, ybar> - y <Ry, ybar>.
// Saved: y, then Ry.
template <class B>
struct SoftmaxHvpRule {
    using layer = B;
    static constexpr std::size_t K = B::in_size;
    static constexpr std::size_t saved = 2 * K, scratch = 0;
    static constexpr bool available = true;

    template <class T>
    static void forward(const T* p, const T*, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        B::forward(p, x, sv, static_cast<T*>(nullptr), m);
        T* rys = sv + K * m;
        if (rx)
            for (std::size_t s = 0; s < m; ++s) SoftmaxSample<T>{K, m, 0}.jacobian(sv + s, rx + s, 0, rys + s, 0);
        else
            std::fill_n(rys, K * m, T(0));
        std::copy_n(sv, K * m, y);
        std::copy_n(rys, K * m, ry);
    }

    template <class T>
    static void pullback(const T*, const T*, T*, T*, const T*, const T*, const T* sv, T*, T* ybar, T* rybar,
                         T* xbar, T* rxbar, std::size_t m) {
        if (!xbar) return;
        const T* rys = sv + K * m;
        for (std::size_t s = 0; s < m; ++s) {
            const SoftmaxSample<T> one{K, m, 0};
            const T *h = sv + s, *rh = rys + s, *yb = ybar + s;
            const T yg = one.dot(h, 0, yb, 0), rg = one.dot(rh, 0, yb, 0);
            one.jacobian(h, rybar + s, 0, rxbar + s, 0);
            for (std::size_t f = 0; f < K; ++f)
                one.at(rxbar + s, f, 0) += one.at(rh, f, 0) * (one.at(yb, f, 0) - yg) - one.at(h, f, 0) * rg;
            one.jacobian(h, yb, 0, xbar + s, 0);
        }
    }
};

}  // namespace detail

}  // namespace chainlet
