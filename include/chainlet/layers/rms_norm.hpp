// RMSNorm: divides the F features of each (flat) sample by their root mean square, then scales them per
// feature:
//   r = 1 / sqrt(mean_f x_f^2 + eps),   xhat_f = x_f r,   y_f = w_f xhat_f,   eps = 1e-5.
// Parameters: w[F] (initialised to 1).
//
// Pullback, with dxhat_f = w_f dy_f:   dw_f += sum_s dy_f xhat_f,
//   dx_f = r (dxhat_f - xhat_f mean_k dxhat_k xhat_k).
// Saved per sample: r. Scratch per sample: the mean.
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
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

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

        template <class T>
        static void init(std::span<T> p, Rng&, InitKind) {
            std::fill(p.begin(), p.end(), T(1));
        }

        // Features are feature-major, [f * n + s]: every inner loop runs along the samples.
        template <class T>
        static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n) {
            // r starts at the first feature's square, not at a zero fill: std::fill_n here gave g++ 12 a
            // false -Wstringop-overflow (a memset of 2^64 - 8 bytes) once inlined into the layer checker.
            T* r = saved;
            for (std::size_t s = 0; s < n; ++s) r[s] = x[s] * x[s];
            for (std::size_t f = 1; f < F; ++f)
                for (std::size_t s = 0; s < n; ++s) r[s] += x[f * n + s] * x[f * n + s];
            const T inv_f = T(1) / static_cast<T>(F);
            for (std::size_t s = 0; s < n; ++s) r[s] = T(1) / std::sqrt(r[s] * inv_f + static_cast<T>(eps));
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

}  // namespace chainlet
