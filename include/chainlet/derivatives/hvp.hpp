// Hessian-vector products with respect to the parameters (for Newton-CG and other second-order
// optimisers), exact: Pearlmutter's R-operator, i.e. the directional derivative R{.} = d/de{.}(p + e v)
// carried through the forward pass and the pullback. SquaredError loss, the mean over the samples of
// sum_o (y_o - t_o)^2 (scale = 1/n):  ybar = 2 scale (y - t),  R ybar = 2 scale Ry.
// The pass walks the network by each layer's hvp_rule (layer.hpp), which its own header holds,
// recursively through containers: the layers of taylor.hpp's pass, and a user's layer that declares one. A layer without one fails to compile with one static_assert
// naming it (jet.hpp), and so does a layer with an activation that has no jet.
// Chunks and groups as in Workspace (workspace.hpp): the same bits on any thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "chainlet/checks.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "chainlet/losses.hpp"

namespace chainlet {

template <class Net, class T>
class HessianVectorWorkspace {
public:
    static constexpr std::size_t L = Net::num_layers;
    static constexpr std::size_t max_groups = 32;
    static constexpr std::size_t chunk = 128;

    using Rule = detail::hvp_rule_of<typename Net::sequence>;

    explicit HessianVectorWorkspace(std::size_t batch, int threads = 0) { reserve(batch, threads); }

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
        // Two partials (gradient, product) per slot of parallel_for_ordered, added into g and hv group by
        // group in order.
        const std::size_t groups = num_groups(batch), partials = ordered_slots(groups, threads);
        if (partial_.size() < 2 * partials * Net::num_params) partial_.resize(2 * partials * Net::num_params);
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
        if (g) std::fill_n(g, P, T(0));
        if (hv) std::fill_n(hv, P, T(0));
        auto partial = [&](std::size_t slot) { return partial_.data() + 2 * slot * P; };
        parallel_for_ordered(
            groups, threads,
            [&](std::size_t gi, int tid, std::size_t slot) {
                Scratch& s = scratch_[static_cast<std::size_t>(tid)];
                T* pg = partial(slot);
                T* ph = pg + P;
                std::fill_n(pg, 2 * P, T(0));
                T l = 0;
                for (std::size_t c = gi * per; c < std::min(chunks, (gi + 1) * per); ++c) {
                    const std::size_t s0 = c * chunk, m = std::min(chunk, n - s0);
                    kernels::gather_transpose(x + s0 * Net::in_size, Net::in_size, nullptr, m, s.x);
                    kernels::gather_transpose(t + s0 * Net::out_size, Net::out_size, nullptr, m, s.target);
                    l += chunk_hvp(p, v, pg, ph, s, m, scale);
                }
                losses_[gi] = l;
            },
            [&](std::size_t, std::size_t slot) {
                if (g) kernels::add_to(g, partial(slot), P);
                if (hv) kernels::add_to(hv, partial(slot) + P, P);
            });
        T total = 0;
        for (std::size_t i = 0; i < groups; ++i) total += losses_[i];
        return total * scale;
    }

    // The same on spans, sizes checked as value_and_gradient checks them: n is x's number of rows (a
    // positive whole number of in_size values), t holds n * out_size targets, p and v num_params values,
    // g and hv num_params or none (empty: not wanted).
    T hvp(std::span<const T> p, std::span<const T> v, std::span<T> g, std::span<T> hv, std::span<const T> x,
          std::span<const T> t, SquaredError loss = {}, int threads = 1) {
        constexpr const char* where = "HessianVectorWorkspace::hvp";
        detail::check_threads(where, threads);
        detail::expect_size(where, "the parameter buffer", Net::num_params, p.size());
        detail::expect_size(where, "the direction v", Net::num_params, v.size());
        if (!g.empty()) detail::expect_size(where, "the gradient buffer", Net::num_params, g.size());
        if (!hv.empty()) detail::expect_size(where, "the product buffer hv", Net::num_params, hv.size());
        const std::size_t n = detail::count_rows(where, x.size(), Net::in_size);
        detail::expect_size(where, "the target buffer", n * Net::out_size, t.size());
        return hvp(p.data(), v.data(), g.empty() ? nullptr : g.data(), hv.empty() ? nullptr : hv.data(), x.data(),
                   t.data(), n, loss, threads);
    }

private:
    struct Scratch {
        aligned_vector<T> buf;
        T *x = nullptr, *y = nullptr, *ry = nullptr, *ybar = nullptr, *rybar = nullptr, *target = nullptr;
        T *saved = nullptr, *work = nullptr;  // Rule::saved, Rule::scratch features x chunk

        void reserve() {
            if (!buf.empty()) return;
            constexpr std::size_t O = Net::out_size;
            const std::size_t sizes[] = {Net::in_size * chunk, O * chunk, O * chunk, O * chunk, O * chunk, O * chunk,
                                         Rule::saved * chunk, Rule::scratch * chunk};
            std::size_t total = 0;
            for (auto z : sizes) total += round_up16(z);
            buf.assign(total, T(0));
            T* q = buf.data();
            T** ptrs[] = {&x, &y, &ry, &ybar, &rybar, &target, &saved, &work};
            for (std::size_t i = 0; i < 8; ++i) {
                *ptrs[i] = q;
                q += round_up16(sizes[i]);
            }
        }
    };

    T chunk_hvp(const T* p, const T* v, T* g, T* hv, Scratch& s, std::size_t m, T scale) const {
        Rule::forward(p, v, static_cast<const T*>(s.x), static_cast<const T*>(nullptr), s.y, s.ry, s.saved, m);
        // the loss: abar = 2 scale (y - t), R abar = 2 scale Ry
        constexpr std::size_t O = Net::out_size;
        const T l = SquaredError::value_and_gradient<T>(s.y, s.target, s.ybar, O, m, scale);
        for (std::size_t k = 0; k < O * m; ++k) s.rybar[k] = T(2) * scale * s.ry[k];
        Rule::pullback(p, v, g, hv, static_cast<const T*>(s.x), static_cast<const T*>(nullptr),
                       static_cast<const T*>(s.saved), s.work, s.ybar, s.rybar, static_cast<T*>(nullptr),
                       static_cast<T*>(nullptr), m);
        return l;
    }

    std::vector<Scratch> scratch_;
    aligned_vector<T> partial_;
    std::vector<T> losses_;
};

}  // namespace chainlet
