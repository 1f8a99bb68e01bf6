// How init_params (train.hpp) draws a chain's initial parameters; each layer's init fills its own slice
// with the portable Rng of random.hpp. Biases always start at zero.
#pragma once

#include <cmath>
#include <span>

#include "chainlet/random.hpp"

namespace chainlet {

// The distribution of the weights: Glorot (Xavier) uniform on [-a, a] with a = sqrt(6 / (fan_in +
// fan_out)), or normal with standard deviation sqrt(2 / (fan_in + fan_out)).
enum class InitKind { glorot_uniform, glorot_normal };

// The Glorot (Xavier) fill of a weight block with fan_in + fan_out = fan, as PyTorch's
// xavier_uniform_/xavier_normal_: uniform on +-sqrt(6 / fan), or normal with variance 2 / fan.
template <class T>
void fill_glorot(std::span<T> w, double fan, Rng& rng, InitKind kind) {
    const double uniform_bound = std::sqrt(6.0 / fan), normal_sd = std::sqrt(2.0 / fan);
    for (auto& v : w)
        v = static_cast<T>(kind == InitKind::glorot_uniform ? uniform_bound * (2 * rng.uniform() - 1)
                                                            : normal_sd * rng.normal());
}

}  // namespace chainlet
