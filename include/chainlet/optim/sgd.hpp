// Stochastic gradient descent with (heavy-ball) momentum, PyTorch's convention:
//   v = momentum * v + g,   p -= lr * v          (momentum 0: plain SGD, v = g)
// A velocity below the smallest normal number is stored as zero, as Adam's moments (adam.hpp): with a
// gradient that stays exactly zero (a dead ReLU unit) v decays into the subnormal range and stays there
// (0.9 times the smallest subnormal rounds back to it), where Intel cores compute by microcode assists.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "chainlet/kernels/simd.hpp"
#include "chainlet/memory.hpp"
#include "chainlet/message.hpp"

namespace chainlet {

template <class T>
class SGD {
public:
    explicit SGD(T lr, T momentum = T(0)) : lr_(lr), mu_(momentum) {
        if (!(lr > 0) || !(momentum >= 0 && momentum < 1))
            throw std::invalid_argument("SGD: need lr > 0 and 0 <= momentum < 1; got lr " + detail::number(lr) +
                                        ", momentum " + detail::number(momentum));
    }
    void init(std::size_t n) { v_.assign(n, T(0)); }
    void step(std::span<T> p, std::span<const T> g) {
        if (p.size() != g.size())
            throw std::invalid_argument("SGD::step: " + std::to_string(p.size()) + " parameters but " +
                                        std::to_string(g.size()) + " gradients");
        if (v_.empty()) init(p.size());
        if (v_.size() != p.size())
            throw std::invalid_argument("SGD::step: initialised for " + std::to_string(v_.size()) + " parameters, given " +
                                        std::to_string(p.size()));
        for (std::size_t i = 0; i < p.size(); ++i) {
            v_[i] = simd::flush_subnormal(mu_ * v_[i] + g[i]);
            p[i] -= lr_ * v_[i];
        }
    }
    T learning_rate() const { return lr_; }
    void set_learning_rate(T lr) { lr_ = lr; }
    std::span<const T> velocity() const { return v_; }
    // Restores a velocity read back from velocity() (a checkpoint); empty means "not started yet".
    void set_velocity(std::span<const T> v) { v_.assign(v.begin(), v.end()); }

private:
    T lr_, mu_;
    aligned_vector<T> v_;
};

}  // namespace chainlet
