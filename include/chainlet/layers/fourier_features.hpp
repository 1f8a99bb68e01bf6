// FourierFeatures<M, ScaleNum, ScaleDen, Trainable>: random Fourier features of the input x (its F values):
//   y = [sin(2 pi B x), cos(2 pi B x)]   (2 M outputs: the M sines, then the M cosines),
// B an M x F matrix (row-major, B[o * F + j]) of N(0, sigma^2) entries, sigma = ScaleNum / ScaleDen, drawn
// at init from the layer's stream. B is the layer's parameter slice: fixed (layer.hpp, num_fixed_params:
// not trained, out of every optimiser's reach, its gradient 0) unless Trainable (TrainableFourierFeatures),
// and stored in checkpoints and safetensors either way. A larger sigma lets the network following it fit
// higher frequencies (Tancik et al. 2020; Wang, Wang and Perdikaris 2021 for PINNs).
//
// Pullback, with z = 2 pi B x:  zbar = cos(z) .* ybar_sin - sin(z) .* ybar_cos,  xbar = 2 pi B^T zbar, and
// for a trainable B: gB += 2 pi zbar x^T.
// Derivative passes (jet.hpp): every jet column of z is 2 pi B times x's column (a linear map), then sin
// and cos act on z's jet as the element-wise rule of an activation; gB += 2 pi sum over the columns of
// zbar_c x_c^T. The R-operator, V the direction of B (0 when B is fixed): Rz = 2 pi (B Rx + V x),
// R y_sin = cos(z) Rz, R y_cos = -sin(z) Rz; R zbar = cos(z) R ybar_sin - sin(z) R ybar_cos
// - Rz .* (sin(z) ybar_sin + cos(z) ybar_cos), R xbar = 2 pi (B^T R zbar + V^T zbar), and for a trainable
// B: gB += 2 pi zbar x^T, hvB += 2 pi (R zbar x^T + zbar Rx^T).
//
// PyTorch: python/chainlet_torch.py's FourierFeatures(M, F, trainable), B its tensor "B" (M x F).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "chainlet/activations.hpp"
#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/kernels/vector_loop.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

namespace detail {
// cos with its jet (value and three derivatives), for the rule of an activation (jet.hpp).
struct CosOfJet {
    template <class V>
    static Jet<V> jet(V z) {
        const V s = simd::sin(z), c = simd::cos(z);
        return {c, -s, -c, s};
    }
};
}  // namespace detail

template <std::size_t M, std::intmax_t ScaleNum = 1, std::intmax_t ScaleDen = 1, bool Trainable = false>
struct FourierFeatures {
    static_assert(M > 0, "FourierFeatures<M, ...>: M, the number of frequencies, must be positive");
    static_assert(ScaleNum > 0 && ScaleDen > 0, "FourierFeatures<M, ScaleNum, ScaleDen>: the scale must be positive");
    static constexpr double sigma = static_cast<double>(ScaleNum) / static_cast<double>(ScaleDen);

    template <class InShape>
    struct bound {
        static constexpr std::size_t in_size = InShape::size, out_size = 2 * M;
        using out_shape = Shape<out_size>;
        static constexpr std::size_t num_params = M * in_size;  // B
        static constexpr std::size_t num_fixed_params = Trainable ? 0 : num_params;
        static constexpr std::size_t saved_per_sample = 0, scratch_per_sample = M;  // zbar
        struct jet_rule;
        struct hvp_rule;

        // B ~ N(0, sigma^2), drawn in double (the same values in float and double, but for the rounding).
        template <class T>
        static void init(std::span<T> p, Rng& rng, InitKind) {
            for (auto& e : p) e = static_cast<T>(sigma * rng.normal());
        }

        // out[r, t] = 2 pi sum_c A[r, c] in[c, t] over N columns t (samples, or jet columns of samples),
        // A = B (z from x) or B^T (xbar from zbar); written (Add: added).
        template <bool Transposed, bool Add = false, class T>
        static void times_two_pi_b(const T* b, const T* in, T* out, std::size_t N) {
            const T two_pi = static_cast<T>(6.283185307179586476925);
            constexpr std::size_t rows = Transposed ? in_size : M, cols = Transposed ? M : in_size;
            for (std::size_t r = 0; r < rows; ++r)
                kernels::vectors_then_scalars<T>(N, [&]<class V>(std::size_t t) {
                    V acc(0);
                    for (std::size_t c = 0; c < cols; ++c)
                        acc = simd::fma(V(b[Transposed ? c * in_size + r : r * in_size + c]), simd::loadv<V>(in + c * N + t), acc);
                    if constexpr (Add) simd::storev(out + r * N + t, simd::fma(V(two_pi), acc, simd::loadv<V>(out + r * N + t)));
                    else simd::storev(out + r * N + t, V(two_pi) * acc);
                });
        }
        template <class T>
        static void project(const T* b, const T* x, T* z, std::size_t N) {
            times_two_pi_b<false>(b, x, z, N);
        }
        template <class T>
        static void project_back(const T* b, const T* zbar, T* xbar, std::size_t N) {
            times_two_pi_b<true>(b, zbar, xbar, N);
        }
        // gB[o, j] += 2 pi sum_t zbar[o, t] x[j, t] over N columns.
        template <class T>
        static void add_b_gradient(const T* zbar, const T* x, T* g, std::size_t N) {
            const T two_pi = static_cast<T>(6.283185307179586476925);
            for (std::size_t o = 0; o < M; ++o)
                for (std::size_t j = 0; j < in_size; ++j) {
                    T sum = 0;
                    kernels::vectors_then_scalars<T>(N, [&]<class V>(std::size_t t) {
                        const V prod = simd::loadv<V>(zbar + o * N + t) * simd::loadv<V>(x + j * N + t);
                        if constexpr (simd::is_vector<V>) sum += simd::hsum<T>(prod);
                        else sum += prod;
                    });
                    g[o * in_size + j] += two_pi * sum;
                }
        }

        template <class T>
        static void forward(const T* p, const T* x, T* y, T*, std::size_t n) {
            T* const sines = y;
            T* const cosines = y + M * n;
            project(p, x, sines, n);  // z, in the sines' block first
            kernels::vectors_then_scalars<T>(M * n, [&]<class V>(std::size_t i) {
                const V z = simd::loadv<V>(sines + i);
                simd::storev(cosines + i, simd::cos(z));
                simd::storev(sines + i, simd::sin(z));
            });
        }
        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T* y, T*, T* scratch, T* dy, T* dx, std::size_t n) {
            if (!dx && !Trainable) return;
            const T* const sines = y;
            const T* const cosines = y + M * n;
            kernels::vectors_then_scalars<T>(M * n, [&]<class V>(std::size_t i) {
                const V zbar = simd::loadv<V>(cosines + i) * simd::loadv<V>(dy + i) -
                               simd::loadv<V>(sines + i) * simd::loadv<V>(dy + M * n + i);
                simd::storev(scratch + i, zbar);
            });
            if constexpr (Trainable) add_b_gradient(static_cast<const T*>(scratch), x, g, n);
            if (dx) project_back(p, static_cast<const T*>(scratch), dx, n);
        }

        static std::string describe() {
            return "FourierFeatures[" + std::to_string(M) + ", sigma " + std::to_string(ScaleNum) + "/" +
                   std::to_string(ScaleDen) + (Trainable ? ", trainable]" : "]");
        }
        // python/chainlet_torch.py's FourierFeatures: B its tensor "B" (M x F), a parameter when trainable, a
        // buffer otherwise (in the state dict either way). Its PyTorch module takes (batch, F): a flat input
        // in PyTorch's order.
        static void torch_layout(TorchModules& m, std::size_t offset) {
            if (InShape::rank != 1 || !m.natural())
                throw std::invalid_argument(
                    "FourierFeatures on an image, a sequence or right after their Flatten: PyTorch orders those features "
                    "(C, H, W) or (C, L), chainlet (H, W, C) or (L, C), and B would meet them in another order; put a "
                    "Dense layer before it");
            TorchTensor b{m.next_module() + ".B", {M, in_size}, {}};
            for (std::size_t i = 0; i < num_params; ++i) b.source.push_back(offset + i);
            m.add(std::move(b));
        }
    };
};

// B trained with the rest of the network (header comment).
template <std::size_t M, std::intmax_t ScaleNum = 1, std::intmax_t ScaleDen = 1>
using TrainableFourierFeatures = FourierFeatures<M, ScaleNum, ScaleDen, true>;

// The derivative passes' rules (header comment). Jet columns: x is in_size x C x m, z (saved) M x C x m.
template <std::size_t M, std::intmax_t ScaleNum, std::intmax_t ScaleDen, bool Trainable>
template <class InShape>
struct FourierFeatures<M, ScaleNum, ScaleDen, Trainable>::bound<InShape>::jet_rule {
    using layer = bound;
    static constexpr std::size_t saved = M, scratch = 0;
    template <class T>
    static void forward(const T* p, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        project(p, x, sv, N);
        detail::ActivationJetRule<Sin<>, T>::template forward<false>(sv, y, M, m, cols.D, cols.second);
        detail::ActivationJetRule<detail::CosOfJet, T>::template forward<false>(sv, y + M * N, M, m, cols.D, cols.second);
    }
    // ybar becomes the two blocks' zbar in place; their sum goes back through 2 pi B^T (and into gB).
    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* sv, T*, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        if (!xbar && !Trainable) return;
        const std::size_t N = cols.C * m;
        detail::ActivationJetRule<Sin<>, T>::template pullback<false>(sv, ybar, M, m, cols.D, cols.second, cols.containing);
        detail::ActivationJetRule<detail::CosOfJet, T>::template pullback<false>(sv, ybar + M * N, M, m, cols.D,
                                                                                 cols.second, cols.containing);
        kernels::add_to(ybar, static_cast<const T*>(ybar + M * N), M * N);
        if constexpr (Trainable) add_b_gradient(static_cast<const T*>(ybar), x, g, N);
        if (xbar) project_back(p, static_cast<const T*>(ybar), xbar, N);
    }
};

template <std::size_t M, std::intmax_t ScaleNum, std::intmax_t ScaleDen, bool Trainable>
template <class InShape>
struct FourierFeatures<M, ScaleNum, ScaleDen, Trainable>::bound<InShape>::hvp_rule {
    using layer = bound;
    static constexpr std::size_t saved = 2 * M, scratch = 2 * M;  // z, Rz;  zbar, R zbar
    template <class T>
    static void forward(const T* p, const T* v, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        T* const z = sv;
        T* const rz = sv + M * m;
        project(p, x, z, m);
        if (rx) project(p, rx, rz, m);
        else std::fill_n(rz, M * m, T(0));
        if constexpr (Trainable) times_two_pi_b<false, true>(v, x, rz, m);  // + 2 pi V x
        kernels::vectors_then_scalars<T>(M * m, [&]<class V>(std::size_t i) {
            const V s = simd::sin(simd::loadv<V>(z + i)), c = simd::cos(simd::loadv<V>(z + i)), r = simd::loadv<V>(rz + i);
            simd::storev(y + i, s);
            simd::storev(y + M * m + i, c);
            simd::storev(ry + i, c * r);
            simd::storev(ry + M * m + i, -(s * r));
        });
    }
    template <class T>
    static void pullback(const T* p, const T* v, T* g, T* hv, const T* x, const T* rx, const T* sv, T* scr, T* ybar,
                         T* rybar, T* xbar, T* rxbar, std::size_t m) {
        if (!xbar && !Trainable) return;
        const T* const z = sv;
        const T* const rz = sv + M * m;
        T* const zbar = scr;
        T* const rzbar = scr + M * m;
        kernels::vectors_then_scalars<T>(M * m, [&]<class V>(std::size_t i) {
            const V s = simd::sin(simd::loadv<V>(z + i)), c = simd::cos(simd::loadv<V>(z + i));
            const V bs = simd::loadv<V>(ybar + i), bc = simd::loadv<V>(ybar + M * m + i);
            const V rbs = simd::loadv<V>(rybar + i), rbc = simd::loadv<V>(rybar + M * m + i);
            simd::storev(zbar + i, c * bs - s * bc);
            simd::storev(rzbar + i, c * rbs - s * rbc - simd::loadv<V>(rz + i) * (s * bs + c * bc));
        });
        if constexpr (Trainable) {
            add_b_gradient(static_cast<const T*>(zbar), x, g, m);
            add_b_gradient(static_cast<const T*>(rzbar), x, hv, m);
            if (rx) add_b_gradient(static_cast<const T*>(zbar), rx, hv, m);
        }
        if (!xbar) return;
        project_back(p, static_cast<const T*>(zbar), xbar, m);
        project_back(p, static_cast<const T*>(rzbar), rxbar, m);
        if constexpr (Trainable) times_two_pi_b<true, true>(v, static_cast<const T*>(zbar), rxbar, m);  // + 2 pi V^T zbar
    }
};

}  // namespace chainlet
