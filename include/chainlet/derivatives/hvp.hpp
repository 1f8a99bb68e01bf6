// Hessian-vector products with respect to the parameters (for Newton-CG and other second-order
// optimisers), exact: Pearlmutter's R-operator, i.e. the directional derivative R{.} = d/de{.}(p + e v)
// carried through the forward pass and the pullback. Chains of Dense layers, SquaredError loss.
//
// Forward, layer l (z = W a + b, a' = f(z)), with v = (V, c) the direction of (W, b):
//   Rz = V a + c + W Ra (Ra = 0 at the input),   Ra' = f'(z) Rz
// Loss (mean over samples of sum_o (y_o - t_o)^2, scale = 1/n): abar = 2 scale (y - t),  R abar = 2 scale Ry.
// Pullback, layer l:
//   zbar = abar f'(z),          R zbar = R abar f'(z) + abar f''(z) Rz
//   gW += a zbar^T,             (Hv)_W += a R zbar^T + Ra zbar^T
//   gb += sum_s zbar,           (Hv)_b += sum_s R zbar
//   abar_prev = W^T zbar,       R abar_prev = V^T zbar + W^T R zbar
// Chunks and groups as in Workspace (workspace.hpp): the same bits on any thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>
#include <vector>

#include "chainlet/derivatives/taylor.hpp"
#include "chainlet/losses.hpp"

namespace chainlet {

template <class Net, class T>
class HessianVectorWorkspace {
public:
    static constexpr std::size_t L = Net::num_layers;
    static constexpr std::size_t max_groups = 32;
    static constexpr std::size_t chunk = 128;

    explicit HessianVectorWorkspace(std::size_t batch, int threads = 0) {
        static_assert([]<std::size_t... I>(std::index_sequence<I...>) {
            return (TaylorDense<typename Net::template layer<I>> && ...);
        }(std::make_index_sequence<L>{}),
                      "chainlet: the parameter Hessian-vector product (derivatives/hvp.hpp) supports chains of Dense "
                      "layers only");
        reserve(batch, threads);
    }

    static std::size_t num_chunks(std::size_t n) { return (n + chunk - 1) / chunk; }
    static std::size_t chunks_per_group(std::size_t n) { return (num_chunks(n) + max_groups - 1) / max_groups; }
    static std::size_t num_groups(std::size_t n) {
        const std::size_t per = std::max<std::size_t>(chunks_per_group(n), 1);
        return (num_chunks(n) + per - 1) / per;
    }

    void reserve(std::size_t batch, int threads = 0) {
        threads = resolve_threads(threads);
        if (scratch_.size() < static_cast<std::size_t>(threads)) scratch_.resize(static_cast<std::size_t>(threads));
        for (auto& s : scratch_) s.reserve();
        const std::size_t groups = num_groups(batch);
        if (partial_.size() < 2 * groups * Net::num_params) partial_.resize(2 * groups * Net::num_params);
        if (losses_.size() < groups) losses_.resize(groups);
    }

    // The SquaredError loss of n samples (x: n rows of in_size, t: n rows of out_size, sample-major),
    // its gradient g and the Hessian-vector product hv = H v (both overwritten; either may be null).
    T hvp(const T* p, const T* v, T* g, T* hv, const T* x, const T* t, std::size_t n, SquaredError = {},
          int threads = 1) {
        threads = resolve_threads(threads);
        reserve(n, threads);
        constexpr std::size_t P = Net::num_params;
        const T scale = T(1) / static_cast<T>(n);
        const std::size_t chunks = num_chunks(n), per = chunks_per_group(n), groups = num_groups(n);
        parallel_for(groups, threads, [&](std::size_t gi, int tid) {
            Scratch& s = scratch_[static_cast<std::size_t>(tid)];
            T* pg = partial_.data() + 2 * gi * P;
            T* ph = pg + P;
            std::fill_n(pg, 2 * P, T(0));
            T l = 0;
            for (std::size_t c = gi * per; c < std::min(chunks, (gi + 1) * per); ++c) {
                const std::size_t s0 = c * chunk, m = std::min(chunk, n - s0);
                kernels::gather_transpose(x + s0 * Net::in_size, Net::in_size, nullptr, m, s.a[0]);
                kernels::gather_transpose(t + s0 * Net::out_size, Net::out_size, nullptr, m, s.target);
                l += chunk_hvp(p, v, pg, ph, s, m, scale);
            }
            losses_[gi] = l;
        });
        T total = 0;
        if (g) std::fill_n(g, P, T(0));
        if (hv) std::fill_n(hv, P, T(0));
        for (std::size_t i = 0; i < groups; ++i) {
            total += losses_[i];
            if (g) kernels::add_to(g, partial_.data() + 2 * i * P, P);
            if (hv) kernels::add_to(hv, partial_.data() + (2 * i + 1) * P, P);
        }
        return total * scale;
    }

private:
    struct Scratch {
        aligned_vector<T> buf;
        std::array<T*, L + 1> a{}, ra{}, z{}, rz{};  // per layer boundary, width x chunk (z, rz: of layer l - 1)
        std::array<T*, 2> bar{}, rbar{};             // cotangents, max_width x chunk
        T* target = nullptr;

        void reserve() {
            if (!buf.empty()) return;
            std::size_t total = round_up16(Net::out_size * chunk) + 4 * round_up16(Net::max_width * chunk);
            for (std::size_t l = 0; l <= L; ++l) total += 4 * round_up16(Net::width[l] * chunk);
            buf.assign(total, T(0));
            T* q = buf.data();
            auto take = [&q](std::size_t count) {
                T* r = q;
                q += round_up16(count);
                return r;
            };
            for (std::size_t l = 0; l <= L; ++l) {
                a[l] = take(Net::width[l] * chunk);
                ra[l] = take(Net::width[l] * chunk);
                z[l] = take(Net::width[l] * chunk);
                rz[l] = take(Net::width[l] * chunk);
            }
            for (int i = 0; i < 2; ++i) {
                bar[i] = take(Net::max_width * chunk);
                rbar[i] = take(Net::max_width * chunk);
            }
            target = take(Net::out_size * chunk);
        }
    };

    T chunk_hvp(const T* p, const T* v, T* g, T* hv, Scratch& s, std::size_t m, T scale) const {
        using kernels::Init;
        // forward and its R-derivative
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (([&] {
                 using Layer = typename Net::template layer<I>;
                 using Act = typename Layer::activation;
                 constexpr std::size_t In = Net::width[I], Out = Net::width[I + 1];
                 const T* w = p + Net::param_offset[I];
                 const T* vw = v + Net::param_offset[I];
                 T *z = s.z[I + 1], *rz = s.rz[I + 1];
                 if constexpr (Layer::has_bias) {
                     kernels::gemm_nn<Identity, Init::row_bias>(Out, m, In, w, 1, Out, s.a[I], m, z, m, w + Layer::num_weights);
                     kernels::gemm_nn<Identity, Init::row_bias>(Out, m, In, vw, 1, Out, s.a[I], m, rz, m, vw + Layer::num_weights);
                 } else {
                     kernels::gemm_nn<Identity, Init::zero>(Out, m, In, w, 1, Out, s.a[I], m, z, m);
                     kernels::gemm_nn<Identity, Init::zero>(Out, m, In, vw, 1, Out, s.a[I], m, rz, m);
                 }
                 if constexpr (I > 0) kernels::gemm_nn<kernels::NoEpilogue, Init::accumulate>(Out, m, In, w, 1, Out, s.ra[I], m, rz, m);
                 T *a = s.a[I + 1], *ra = s.ra[I + 1];
                 kernels::vectors_then_scalars<T>(Out * m, [&]<class V>(std::size_t k) {
                     const Jet<V> j = Act::jet(simd::loadv<V>(z + k));
                     simd::storev(a + k, j.value);
                     simd::storev(ra + k, j.d1 * simd::loadv<V>(rz + k));
                 });
             }()),
             ...);
        }(std::make_index_sequence<L>{});
        // the loss: abar = 2 scale (y - t), R abar = 2 scale Ry
        constexpr std::size_t O = Net::out_size;
        const T l = SquaredError::value_and_gradient<T>(s.a[L], s.target, s.bar[(L - 1) % 2], O, m, scale);
        for (std::size_t k = 0; k < O * m; ++k) s.rbar[(L - 1) % 2][k] = T(2) * scale * s.ra[L][k];
        // pullback and its R-derivative
        [&]<std::size_t... R>(std::index_sequence<R...>) {
            (([&] {
                 constexpr std::size_t I = L - 1 - R;
                 using Layer = typename Net::template layer<I>;
                 using Act = typename Layer::activation;
                 constexpr std::size_t In = Net::width[I], Out = Net::width[I + 1];
                 const T* w = p + Net::param_offset[I];
                 const T* vw = v + Net::param_offset[I];
                 T* gw = g + Net::param_offset[I];
                 T* hw = hv + Net::param_offset[I];
                 T *zbar = s.bar[I % 2], *rzbar = s.rbar[I % 2];
                 const T *z = s.z[I + 1], *rz = s.rz[I + 1];
                 kernels::vectors_then_scalars<T>(Out * m, [&]<class V>(std::size_t k) {
                     const Jet<V> j = Act::jet(simd::loadv<V>(z + k));
                     const V ab = simd::loadv<V>(zbar + k), rab = simd::loadv<V>(rzbar + k);
                     simd::storev(zbar + k, ab * j.d1);
                     simd::storev(rzbar + k, simd::fma(rab, j.d1, ab * j.d2 * simd::loadv<V>(rz + k)));
                 });
                 kernels::gemm_nt(In, Out, m, s.a[I], m, zbar, m, gw, Out);
                 kernels::gemm_nt(In, Out, m, s.a[I], m, rzbar, m, hw, Out);
                 if constexpr (I > 0) kernels::gemm_nt(In, Out, m, s.ra[I], m, zbar, m, hw, Out);
                 if constexpr (Layer::has_bias) {
                     kernels::row_sums_add(Out, m, zbar, m, gw + Layer::num_weights);
                     kernels::row_sums_add(Out, m, rzbar, m, hw + Layer::num_weights);
                 }
                 if constexpr (I > 0) {
                     T *prev = s.bar[(I - 1) % 2], *rprev = s.rbar[(I - 1) % 2];
                     kernels::gemm_nn<Identity, Init::zero>(In, m, Out, w, Out, 1, zbar, m, prev, m);
                     kernels::gemm_nn<Identity, Init::zero>(In, m, Out, vw, Out, 1, zbar, m, rprev, m);
                     kernels::gemm_nn<kernels::NoEpilogue, Init::accumulate>(In, m, Out, w, Out, 1, rzbar, m, rprev, m);
                 }
             }()),
             ...);
        }(std::make_index_sequence<L>{});
        return l;
    }

    std::vector<Scratch> scratch_;
    aligned_vector<T> partial_;
    std::vector<T> losses_;
};

}  // namespace chainlet
