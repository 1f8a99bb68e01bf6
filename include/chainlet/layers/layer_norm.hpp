// LayerNorm: normalises the F features of each (flat) sample to zero mean and unit variance, then scales
// and shifts them per feature:
//   mu = mean_f x_f,   var = mean_f (x_f - mu)^2 (biased, as PyTorch),   r = 1 / sqrt(var + eps),
//   xhat_f = (x_f - mu) r,   y_f = w_f xhat_f + b_f,   eps = 1e-5 (PyTorch's default).
// Parameters, in this order: w[F] (initialised to 1), b[F] (initialised to 0).
//
// Pullback, with dxhat_f = w_f dy_f:   dw_f += sum_s dy_f xhat_f,   db_f += sum_s dy_f,
//   dx_f = r (dxhat_f - mean_k dxhat_k - xhat_f mean_k dxhat_k xhat_k).
// Saved per sample: mu and r. Scratch per sample: the two means.
//
// In the derivative passes (jet_rule, hvp_rule; layer.hpp): LayerNorm is RMSNorm (rms_norm.hpp) of the
// centred input xc = P x, P = I - 1 1^T / F, plus the bias, since var = mean_f xc_f^2. P is linear and
// symmetric: every jet column and Rx is centred on the way in, and every input cotangent (xbar, R xbar) on
// the way out; the bias adds to the value column and to Ry (its direction), and gets the value column's
// ybar (R ybar for the HVP).
//
// PyTorch: nn.LayerNorm(F) (eps=1e-5, elementwise_affine=True): weight = w, bias = b.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "chainlet/init.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/layers/rms_norm.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

namespace detail {
template <class B>
struct LayerNormJetRule;
template <class B>
struct LayerNormHvpRule;
}  // namespace detail

struct LayerNorm {
    static constexpr double eps = 1e-5;

    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(InShape::rank == 1, "LayerNorm normalises the features of a flat sample: put Flatten before it");
            static_assert(InShape::rank != 1 || InShape::size >= 2,
                          "LayerNorm over a single feature would output its bias only");
            return InShape::rank != 1 || InShape::size < 2;
        }();
        static constexpr std::size_t F = InShape::size;
        static constexpr std::size_t in_size = F, out_size = F;
        using out_shape = InShape;
        static constexpr std::size_t num_params = 2 * F;
        static constexpr std::size_t saved_per_sample = 2, scratch_per_sample = 2;
        using jet_rule = detail::LayerNormJetRule<bound>;  // the derivative passes' rules (below)
        using hvp_rule = detail::LayerNormHvpRule<bound>;

        template <class T>
        static void init(std::span<T> p, Rng&, InitKind) {
            std::fill_n(p.begin(), F, T(1));
            std::fill(p.begin() + F, p.end(), T(0));
        }

        // Features are feature-major, [f * n + s]: every inner loop runs along the samples.
        template <class T>
        static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n) {
            T* mu = saved;
            T* r = saved + n;
            const T inv_f = T(1) / static_cast<T>(F);
            std::fill_n(mu, n, T(0));
            std::fill_n(r, n, T(0));
            for (std::size_t f = 0; f < F; ++f)
                for (std::size_t s = 0; s < n; ++s) mu[s] += x[f * n + s];
            for (std::size_t s = 0; s < n; ++s) mu[s] *= inv_f;
            for (std::size_t f = 0; f < F; ++f)
                for (std::size_t s = 0; s < n; ++s) {
                    const T d = x[f * n + s] - mu[s];
                    r[s] += d * d;
                }
            for (std::size_t s = 0; s < n; ++s) r[s] = T(1) / std::sqrt(r[s] * inv_f + static_cast<T>(eps));
            const T* w = p;
            const T* b = p + F;
            for (std::size_t f = 0; f < F; ++f)
                for (std::size_t s = 0; s < n; ++s) y[f * n + s] = w[f] * ((x[f * n + s] - mu[s]) * r[s]) + b[f];
        }

        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T*, T* saved, T* scratch, T* dy, T* dx,
                             std::size_t n) {
            const T* mu = saved;
            const T* r = saved + n;
            const T* w = p;
            T* mean_d = scratch;       // mean_f dxhat_f
            T* mean_dx = scratch + n;  // mean_f dxhat_f xhat_f
            std::fill_n(mean_d, n, T(0));
            std::fill_n(mean_dx, n, T(0));
            for (std::size_t f = 0; f < F; ++f) {
                T gw = 0, gb = 0;
                for (std::size_t s = 0; s < n; ++s) {
                    const T xhat = (x[f * n + s] - mu[s]) * r[s];
                    const T d = dy[f * n + s];
                    gw += d * xhat;
                    gb += d;
                    mean_d[s] += w[f] * d;
                    mean_dx[s] += w[f] * d * xhat;
                }
                g[f] += gw;
                g[F + f] += gb;
            }
            if (!dx) return;
            const T inv_f = T(1) / static_cast<T>(F);
            for (std::size_t f = 0; f < F; ++f)
                for (std::size_t s = 0; s < n; ++s) {
                    const T xhat = (x[f * n + s] - mu[s]) * r[s];
                    dx[f * n + s] = r[s] * (w[f] * dy[f * n + s] - (mean_d[s] + xhat * mean_dx[s]) * inv_f);
                }
        }

        static std::string describe() { return "LayerNorm"; }
        // The normalisation does not mix the order of the features: weight j (PyTorch's order) is
        // chainlet's feature input_feature(j), and the order is kept for the next layer.
        static void torch_layout(TorchModules& m, std::size_t offset) {
            const std::string name = m.next_module();
            TorchTensor weight{name + ".weight", {F}, std::vector<std::size_t>(F)};
            TorchTensor bias{name + ".bias", {F}, std::vector<std::size_t>(F)};
            for (std::size_t j = 0; j < F; ++j) {
                weight.source[j] = offset + m.input_feature(j);
                bias.source[j] = offset + F + m.input_feature(j);
            }
            m.add(std::move(weight));
            m.add(std::move(bias));
        }
    };
};

namespace detail {

// x -> P x on `columns` columns of m samples, feature f of column c at x[f * stride + c * m + s]: each
// column of each sample less its mean over the features (summed as the layer's forward sums mu).
template <std::size_t F, class T>
void centre_features(const T* x, T* xc, std::size_t stride, std::size_t columns, std::size_t m) {
    const T inv_f = T(1) / static_cast<T>(F);
    for (std::size_t c = 0; c < columns; ++c)
        for (std::size_t s = 0; s < m; ++s) {
            const std::size_t at = c * m + s;
            T mu = 0;
            for (std::size_t f = 0; f < F; ++f) mu += x[f * stride + at];
            mu *= inv_f;
            for (std::size_t f = 0; f < F; ++f) xc[f * stride + at] = x[f * stride + at] - mu;
        }
}

// Saved: RMSNorm's jet rule's (xhat in every column, then r), then the centred columns xc.
template <class B>
struct LayerNormJetRule {
    using layer = B;
    static constexpr std::size_t F = B::in_size;
    using Rms = typename RMSNorm::bound<Shape<F>>::jet_rule;
    static constexpr std::size_t saved = Rms::saved + F, scratch = 0;
    static constexpr bool available = true;

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        T* xc = sv + Rms::saved * N;
        centre_features<F>(x, xc, N, cols.C, m);
        Rms::forward(p, xc, y, sv, m, cols);
        for (std::size_t f = 0; f < F; ++f)
            for (std::size_t s = 0; s < m; ++s) y[f * N + s] += p[F + f];
    }

    template <class T>
    static void pullback(const T* p, T* g, const T*, const T* sv, T*, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        for (std::size_t f = 0; f < F; ++f) {
            T sum = 0;
            for (std::size_t s = 0; s < m; ++s) sum += ybar[f * N + s];
            g[F + f] += sum;
        }
        Rms::pullback(p, g, sv + Rms::saved * N, sv, static_cast<T*>(nullptr), ybar, xbar, m, cols);
        if (xbar) centre_features<F>(xbar, xbar, N, cols.C, m);
    }
};

// Saved: r (RMSNorm's), then xc and, after it, R xc.
template <class B>
struct LayerNormHvpRule {
    using layer = B;
    static constexpr std::size_t F = B::in_size;
    using Rms = typename RMSNorm::bound<Shape<F>>::hvp_rule;
    static constexpr std::size_t saved = Rms::saved + 2 * F, scratch = 0;
    static constexpr bool available = true;

    template <class T>
    static void forward(const T* p, const T* v, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        T* xc = sv + Rms::saved * m;
        T* rxc = rx ? xc + F * m : nullptr;
        centre_features<F>(x, xc, m, 1, m);
        if (rx) centre_features<F>(rx, rxc, m, 1, m);
        Rms::forward(p, v, xc, rxc, y, ry, sv, m);
        for (std::size_t f = 0; f < F; ++f)
            for (std::size_t s = 0; s < m; ++s) {
                y[f * m + s] += p[F + f];
                ry[f * m + s] += v[F + f];
            }
    }

    template <class T>
    static void pullback(const T* p, const T* v, T* g, T* hv, const T*, const T* rx, const T* sv, T*, T* ybar,
                         T* rybar, T* xbar, T* rxbar, std::size_t m) {
        const T* xc = sv + Rms::saved * m;
        for (std::size_t f = 0; f < F; ++f) {
            T sum = 0, rsum = 0;
            for (std::size_t s = 0; s < m; ++s) {
                sum += ybar[f * m + s];
                rsum += rybar[f * m + s];
            }
            g[F + f] += sum;
            hv[F + f] += rsum;
        }
        Rms::pullback(p, v, g, hv, xc, rx ? xc + F * m : nullptr, sv, static_cast<T*>(nullptr), ybar, rybar, xbar, rxbar, m);
        if (!xbar) return;
        centre_features<F>(xbar, xbar, m, 1, m);
        centre_features<F>(rxbar, rxbar, m, 1, m);
    }
};

}  // namespace detail

}  // namespace chainlet
