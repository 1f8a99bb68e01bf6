// Adam and AdamW on flat parameter and gradient spans (Kingma & Ba 2015; Loshchilov & Hutter 2019),
// with PyTorch's conventions so results can be compared step for step:
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
//   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// AdamW first decays the parameters: p -= lr * weight_decay * p, but for the runs given to keep_fixed (a
// network's fixed parameters, layer.hpp: their gradient is zero, so then nothing moves them).
// Moments below the smallest normal number are stored as zero. A gradient that stays exactly zero
// (a network that fits its one sample) otherwise decays v into the subnormal range (~16,000 steps
// across it, b2 = 0.999, float) and never out of it: below 500 times the smallest subnormal, b2 v
// rounds back to v. Intel cores compute with subnormal operands or results by microcode assists, an
// order of magnitude slower than with normal numbers (docs/profile.md). A flushed m changes a step by
// at most lr * 1.2e-38 / ((1 - b1^t) eps) (float); a flushed v changes sqrt(v / (1 - b2^t)) by at most
// 3.5e-18, nothing next to eps unless eps is set that small.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "chainlet/kernels/simd.hpp"
#include "chainlet/memory.hpp"
#include "chainlet/message.hpp"
#include "chainlet/param_range.hpp"

namespace chainlet {

template <class T>
class AdamW {
public:
    explicit AdamW(T lr, T weight_decay = T(0.01), T beta1 = T(0.9), T beta2 = T(0.999), T eps = T(1e-8))
        : lr_(lr), wd_(weight_decay), b1_(beta1), b2_(beta2), eps_(eps) {
        if (!(lr > 0) || !(weight_decay >= 0) || !(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) || !(eps > 0))
            throw std::invalid_argument("Adam: need lr > 0, weight_decay >= 0, 0 <= beta1, beta2 < 1, eps > 0; got lr " +
                                        detail::number(lr) + ", weight_decay " + detail::number(weight_decay) +
                                        ", beta1 " + detail::number(beta1) + ", beta2 " + detail::number(beta2) +
                                        ", eps " + detail::number(eps));
    }

    // Allocates the moment buffers (zeroed) and restarts the step count; step() calls it on first use.
    void init(std::size_t n) {
        m_.assign(n, T(0));
        v_.assign(n, T(0));
        t_ = 0;
    }

    // The entries the decay leaves as they are: runs in increasing order, not overlapping (fit gives it
    // fixed_param_ranges<Net>()). Kept across init().
    void keep_fixed(std::vector<ParamRange> runs) {
        std::size_t end = 0;
        for (const ParamRange& r : runs) {
            if (r.first < end || r.count == 0)
                throw std::invalid_argument("Adam::keep_fixed: the runs must be non-empty, in increasing order and not "
                                            "overlap; run at " + std::to_string(r.first) + " of " + std::to_string(r.count));
            end = r.first + r.count;
        }
        fixed_ = std::move(runs);
    }
    std::span<const ParamRange> fixed() const { return fixed_; }

    void step(std::span<T> p, std::span<const T> g) {
        if (p.size() != g.size())
            throw std::invalid_argument("Adam::step: " + std::to_string(p.size()) + " parameters but " +
                                        std::to_string(g.size()) + " gradients");
        if (m_.empty()) init(p.size());
        if (m_.size() != p.size())
            throw std::invalid_argument("Adam::step: initialised for " + std::to_string(m_.size()) + " parameters, given " +
                                        std::to_string(p.size()));
        if (!fixed_.empty() && fixed_.back().first + fixed_.back().count > p.size())
            throw std::invalid_argument("Adam::step: a fixed run ends at " +
                                        std::to_string(fixed_.back().first + fixed_.back().count) + ", past the " +
                                        std::to_string(p.size()) + " parameters");
        ++t_;
        const T c1 = T(1) / (T(1) - static_cast<T>(std::pow(static_cast<double>(b1_), static_cast<double>(t_))));
        const T c2 = T(1) / (T(1) - static_cast<T>(std::pow(static_cast<double>(b2_), static_cast<double>(t_))));
        const T decay = T(1) - lr_ * wd_;
        // One body for the vector loop and the scalar tail (the compiler does not vectorise std::sqrt
        // while it may set errno).
        auto update = [&]<class V>(std::size_t i, T factor) {
            const V gi = simd::loadv<V>(&g[i]);
            const V m = simd::flush_subnormal(V(b1_) * simd::loadv<V>(&m_[i]) + V(1 - b1_) * gi);
            const V v = simd::flush_subnormal(V(b2_) * simd::loadv<V>(&v_[i]) + V(1 - b2_) * gi * gi);
            simd::storev(&m_[i], m);
            simd::storev(&v_[i], v);
            const V step = V(lr_) * (m * V(c1)) / (simd::sqrt(v * V(c2)) + V(eps_));
            simd::storev(&p[i], simd::loadv<V>(&p[i]) * V(factor) - step);
        };
        constexpr std::size_t W = simd::width<T>;
        auto run = [&](std::size_t begin, std::size_t end, T decay) {
            std::size_t i = begin;
            if constexpr (simd::enabled)
                for (; i + W <= end; i += W) update.template operator()<simd::vec<T>>(i, decay);
            for (; i < end; ++i) update.template operator()<T>(i, decay);
        };
        std::size_t at = 0;
        for (const ParamRange& r : fixed_) {
            run(at, r.first, decay);
            run(r.first, r.first + r.count, T(1));
            at = r.first + r.count;
        }
        run(at, p.size(), decay);
    }

    T learning_rate() const { return lr_; }
    void set_learning_rate(T lr) { lr_ = lr; }
    std::size_t steps() const { return t_; }
    std::span<const T> first_moment() const { return m_; }
    std::span<const T> second_moment() const { return v_; }
    // Restores a state read back from first_moment(), second_moment() and steps() (a checkpoint).
    // Empty moments mean "not started yet": step() then allocates them on first use.
    void set_state(std::span<const T> m, std::span<const T> v, std::size_t steps) {
        if (m.size() != v.size())
            throw std::invalid_argument("Adam::set_state: " + std::to_string(m.size()) + " first moments but " +
                                        std::to_string(v.size()) + " second moments");
        m_.assign(m.begin(), m.end());
        v_.assign(v.begin(), v.end());
        t_ = steps;
    }

protected:
    T lr_, wd_, b1_, b2_, eps_;
    aligned_vector<T> m_, v_;
    std::size_t t_ = 0;
    std::vector<ParamRange> fixed_;
};

// Adam is AdamW without weight decay (decay factor exactly 1).
template <class T>
class Adam : public AdamW<T> {
public:
    explicit Adam(T lr, T beta1 = T(0.9), T beta2 = T(0.999), T eps = T(1e-8)) : AdamW<T>(lr, T(0), beta1, beta2, eps) {}
};

}  // namespace chainlet
