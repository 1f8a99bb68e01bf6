// RMSNorm: divides the F features of each (flat) sample by their root mean square, then scales them per
// feature:
//   r = 1 / sqrt(mean_f x_f^2 + eps),   xhat_f = x_f r,   y_f = w_f xhat_f,   eps = 1e-5.
// Parameters: w[F] (initialised to 1).
//
// Pullback, with dxhat_f = w_f dy_f:   dw_f += sum_s dy_f xhat_f,
//   dx_f = r (dxhat_f - xhat_f mean_k dxhat_k xhat_k).
// Saved per sample: r. Scratch per sample: the mean.
//
// In the derivative passes (jet_rule, hvp_rule; layer.hpp), below the layer. With <u, v> = mean_f u_f v_f
// and c_v = <xhat, v>, the derivatives of xhat(x) along directions u, v are
//   dxhat[v] = r (v - xhat c_v)   (a symmetric map: its transpose is itself),
//   d2xhat[u, v] = r^2 (-c_u v - c_v u + xhat (3 c_u c_v - <u, v>)).
//
// PyTorch: nn.RMSNorm(F, eps=1e-5) (PyTorch 2.4 and later; give eps explicitly, since its default,
// eps=None, means torch.finfo(dtype).eps): weight = w. PyTorch 2.4's formula is the one above,
// x * rsqrt(mean(x^2) + eps) * weight.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

namespace detail {
template <class B>
struct RMSNormJetRule;
template <class B>
struct RMSNormHvpRule;
}  // namespace detail

struct RMSNorm {
    static constexpr double eps = 1e-5;

    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(InShape::rank == 1, "RMSNorm normalises the features of a flat sample: put Flatten before it");
            return InShape::rank != 1;
        }();
        static constexpr std::size_t F = InShape::size;
        static constexpr std::size_t in_size = F, out_size = F;
        using out_shape = InShape;
        static constexpr std::size_t num_params = F;
        static constexpr std::size_t saved_per_sample = 1, scratch_per_sample = 1;
        using jet_rule = detail::RMSNormJetRule<bound>;  // the derivative passes' rules (below)
        using hvp_rule = detail::RMSNormHvpRule<bound>;

        template <class T>
        static void init(std::span<T> p, Rng&, InitKind) {
            std::fill(p.begin(), p.end(), T(1));
        }

        // r[s] for the first `count` samples, feature f of sample s at x[f * stride + s] (the derivative
        // rules' columns are `stride` apart).
        template <class T>
        static void inverse_rms(const T* x, std::size_t stride, std::size_t count, T* r) {
            // r starts at the first feature's square, not at a zero fill: std::fill_n here gave g++ 12 a
            // false -Wstringop-overflow (a memset of 2^64 - 8 bytes) once inlined into the layer checker.
            for (std::size_t s = 0; s < count; ++s) r[s] = x[s] * x[s];
            for (std::size_t f = 1; f < F; ++f)
                for (std::size_t s = 0; s < count; ++s) r[s] += x[f * stride + s] * x[f * stride + s];
            const T inv_f = T(1) / static_cast<T>(F);
            for (std::size_t s = 0; s < count; ++s) r[s] = T(1) / std::sqrt(r[s] * inv_f + static_cast<T>(eps));
        }

        // Features are feature-major, [f * n + s]: every inner loop runs along the samples.
        template <class T>
        static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n) {
            T* r = saved;
            inverse_rms(x, n, n, r);
            for (std::size_t f = 0; f < F; ++f)
                for (std::size_t s = 0; s < n; ++s) y[f * n + s] = p[f] * (x[f * n + s] * r[s]);
        }

        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T*, T* saved, T* scratch, T* dy, T* dx,
                             std::size_t n) {
            const T* r = saved;
            T* mean_dx = scratch;  // mean_f dxhat_f xhat_f
            std::fill_n(mean_dx, n, T(0));
            for (std::size_t f = 0; f < F; ++f) {
                T gw = 0;
                for (std::size_t s = 0; s < n; ++s) {
                    const T xhat = x[f * n + s] * r[s];
                    const T d = dy[f * n + s];
                    gw += d * xhat;
                    mean_dx[s] += p[f] * d * xhat;
                }
                g[f] += gw;
            }
            if (!dx) return;
            const T inv_f = T(1) / static_cast<T>(F);
            for (std::size_t f = 0; f < F; ++f)
                for (std::size_t s = 0; s < n; ++s) {
                    const T xhat = x[f * n + s] * r[s];
                    dx[f * n + s] = r[s] * (p[f] * dy[f * n + s] - xhat * mean_dx[s] * inv_f);
                }
        }

        static std::string describe() { return "RMSNorm"; }
        // Weight j (PyTorch's order) is chainlet's feature input_feature(j); the order is kept.
        static void torch_layout(TorchModules& m, std::size_t offset) {
            const std::string name = m.next_module();
            TorchTensor weight{name + ".weight", {F}, std::vector<std::size_t>(F)};
            for (std::size_t j = 0; j < F; ++j) weight.source[j] = offset + m.input_feature(j);
            m.add(std::move(weight));
        }
    };
};

namespace detail {

// A sample's view of RMSNorm's rules: feature f of column c at at[f * stride + c * m] (the jet layout,
// jet.hpp; stride = C m), and its r and xhat.
template <class T>
struct RMSNormSample {
    std::size_t F, stride, m;
    T r;
    T mean(const T* u, std::size_t cu, const T* v, std::size_t cv) const {  // <u_cu, v_cv>
        T s = 0;
        for (std::size_t f = 0; f < F; ++f) s += u[f * stride + cu * m] * v[f * stride + cv * m];
        return s / static_cast<T>(F);
    }
};

// Input derivatives (jet.hpp's columns): xhat_0 = r a_0, xhat_i = dxhat[a_i], xhat_S = dxhat[a_S] +
// sum_{i in S} d2xhat[a_i, a_i], y_c = w xhat_c. Pullback, with g_c = w ybar_c (sums over f, F features):
//   wbar += sum_c ybar_c xhat_c;   abar_i = dxhat[g_i] + the d2xhat terms' share, abar_S = dxhat[g_S];
//   abar_0 = dxhat[P] - r^2 xhat rho / F, with P and rho the derivatives of sum_c <g_c, xhat_c> F with
//   respect to xhat and r, the other columns held (r's gradient is -r^2 xhat / F).
// Saved: xhat in every column, then r per sample.
template <class B>
struct RMSNormJetRule {
    using layer = B;
    static constexpr std::size_t F = B::in_size;
    static constexpr std::size_t saved = F + 1, scratch = 0;
    static constexpr bool available = true;

    template <class T>
    static void forward(const T* w, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        const std::size_t C = cols.C, D = cols.D, N = C * m;
        T* xhat = sv;
        B::inverse_rms(x, N, m, sv + F * N);  // column 0's r, after xhat
        for (std::size_t s = 0; s < m; ++s) {
            const T* a = x + s;
            T* h = xhat + s;
            const T r = sv[F * N + s];
            const RMSNormSample<T> one{F, N, m, r};
            for (std::size_t f = 0; f < F; ++f) h[f * N] = r * a[f * N];
            for (std::size_t c = 1; c < C; ++c) {  // dxhat of every column
                const T cv = one.mean(h, 0, a, c);
                for (std::size_t f = 0; f < F; ++f) h[f * N + c * m] = r * (a[f * N + c * m] - h[f * N] * cv);
            }
            for (std::size_t k = 0; k < cols.second.size(); ++k) {
                const std::size_t cs = 1 + D + k;
                for (std::size_t i : cols.second[k]) {
                    const T ci = one.mean(h, 0, a, 1 + i), tt = one.mean(a, 1 + i, a, 1 + i);
                    for (std::size_t f = 0; f < F; ++f)
                        h[f * N + cs * m] += r * r * (T(-2) * ci * a[f * N + (1 + i) * m] + h[f * N] * (3 * ci * ci - tt));
                }
            }
            for (std::size_t f = 0; f < F; ++f)
                for (std::size_t c = 0; c < C; ++c) y[f * N + c * m + s] = w[f] * h[f * N + c * m];
        }
    }

    template <class T>
    static void pullback(const T* w, T* gw, const T* x, const T* sv, T*, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        const std::size_t C = cols.C, D = cols.D, N = C * m;
        const T inv_f = T(1) / static_cast<T>(F);
        for (std::size_t f = 0; f < F; ++f) {
            T sum = 0;
            for (std::size_t c = 0; c < C; ++c)
                for (std::size_t s = 0; s < m; ++s) sum += ybar[f * N + c * m + s] * sv[f * N + c * m + s];
            gw[f] += sum;
        }
        if (!xbar) return;
        for (std::size_t s = 0; s < m; ++s) {
            const T *a = x + s, *h = sv + s, *yb = ybar + s;
            T* ab = xbar + s;
            const T r = sv[F * N + s];
            const RMSNormSample<T> one{F, N, m, r};
            const auto g = [&](std::size_t f, std::size_t c) { return w[f] * yb[f * N + c * m]; };
            const auto sum_g = [&](std::size_t c, const T* u, std::size_t cu) {  // sum_f g_c u_cu
                T t = 0;
                for (std::size_t f = 0; f < F; ++f) t += g(f, c) * u[f * N + cu * m];
                return t;
            };
            // Column 0 of ab holds P until the end; rho is P's partner for r.
            T rho = 0;
            for (std::size_t f = 0; f < F; ++f) ab[f * N] = g(f, 0);
            for (std::size_t c = 1; c < C; ++c) {  // xhat_c = r (a_c - xhat c_c), through dxhat
                const T cc = one.mean(h, 0, a, c), A = sum_g(c, a, c), Bc = sum_g(c, h, 0);
                rho += A - cc * Bc;
                for (std::size_t f = 0; f < F; ++f) {
                    ab[f * N + c * m] = r * (g(f, c) - h[f * N] * Bc * inv_f);
                    ab[f * N] += r * (-a[f * N + c * m] * inv_f * Bc - cc * g(f, c));
                }
            }
            for (std::size_t k = 0; k < cols.second.size(); ++k) {  // r^2 (-2 c_i a_i + xhat (3 c_i^2 - <a_i, a_i>))
                const std::size_t cs = 1 + D + k;
                const T Bs = sum_g(cs, h, 0);
                for (std::size_t i : cols.second[k]) {
                    const std::size_t ci_col = 1 + i;
                    const T ci = one.mean(h, 0, a, ci_col), tt = one.mean(a, ci_col, a, ci_col);
                    const T A = sum_g(cs, a, ci_col);
                    rho += 2 * r * (T(-2) * ci * A + (3 * ci * ci - tt) * Bs);
                    for (std::size_t f = 0; f < F; ++f) {
                        const T t = a[f * N + ci_col * m], hf = h[f * N], G = g(f, cs);
                        ab[f * N + ci_col * m] +=
                            r * r * (T(-2) * ci * G + (T(-2) * hf * A + 6 * ci * hf * Bs - 2 * t * Bs) * inv_f);
                        ab[f * N] += r * r * ((T(-2) * t * A + 6 * ci * t * Bs) * inv_f + (3 * ci * ci - tt) * G);
                    }
                }
            }
            const T hp = one.mean(h, 0, ab, 0);  // <xhat, P>
            for (std::size_t f = 0; f < F; ++f)
                ab[f * N] = r * (ab[f * N] - h[f * N] * hp) - r * r * h[f * N] * rho * inv_f;
        }
    }
};

// The R-operator (derivatives/hvp.hpp), v = (V, Ra) the directions of w and the input:
//   Ry = V xhat + w dxhat[Ra]
// Pullback, with g = w ybar and Rg = V ybar + w R ybar:
//   gw += ybar xhat,   (Hv)_w += R ybar xhat + ybar dxhat[Ra],
//   abar = dxhat[g],   R abar = dxhat[Rg] + d2xhat[Ra, g].
// Saved: r.
template <class B>
struct RMSNormHvpRule {
    using layer = B;
    static constexpr std::size_t F = B::in_size;
    static constexpr std::size_t saved = B::saved_per_sample, scratch = 0;  // r, as the layer saves it
    static constexpr bool available = true;

    template <class T>
    static void forward(const T* w, const T* vw, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        B::forward(w, x, y, sv, m);  // y, and r in sv (the layer's saved)
        for (std::size_t s = 0; s < m; ++s) {
            const T r = sv[s];
            T cv = 0;
            if (rx) {
                for (std::size_t f = 0; f < F; ++f) cv += r * x[f * m + s] * rx[f * m + s];
                cv /= static_cast<T>(F);
            }
            for (std::size_t f = 0; f < F; ++f) {
                const T h = r * x[f * m + s];
                ry[f * m + s] = vw[f] * h + (rx ? w[f] * r * (rx[f * m + s] - h * cv) : T(0));
            }
        }
    }

    template <class T>
    static void pullback(const T* w, const T* vw, T* gw, T* hw, const T* x, const T* rx, const T* sv, T*, T* ybar,
                         T* rybar, T* prev, T* rprev, std::size_t m) {
        const T inv_f = T(1) / static_cast<T>(F);
        for (std::size_t s = 0; s < m; ++s) {
            const T r = sv[s];
            const auto at = [&](std::size_t f) { return f * m + s; };
            T cv = 0, cg = 0, crg = 0, vg = 0;  // <xhat, Ra>, <xhat, g>, <xhat, Rg>, <Ra, g>
            for (std::size_t f = 0; f < F; ++f) {
                const T h = r * x[at(f)], g = w[f] * ybar[at(f)];
                cg += h * g;
                crg += h * (vw[f] * ybar[at(f)] + w[f] * rybar[at(f)]);
                if (rx) {
                    cv += h * rx[at(f)];
                    vg += rx[at(f)] * g;
                }
            }
            cv *= inv_f, cg *= inv_f, crg *= inv_f, vg *= inv_f;
            for (std::size_t f = 0; f < F; ++f) {
                const T h = r * x[at(f)], yb = ybar[at(f)], ryb = rybar[at(f)];
                const T dh = rx ? r * (rx[at(f)] - h * cv) : T(0);  // dxhat[Ra]
                gw[f] += yb * h;
                hw[f] += ryb * h + yb * dh;
                if (!prev) continue;
                const T g = w[f] * yb, rg = vw[f] * yb + w[f] * ryb;
                prev[at(f)] = r * (g - h * cg);
                rprev[at(f)] = r * (rg - h * crg) +
                               (rx ? r * r * (-cv * g - cg * rx[at(f)] + h * (3 * cv * cg - vg)) : T(0));
            }
        }
    }
};

}  // namespace detail

}  // namespace chainlet
