// How init_params (train.hpp) draws a chain's initial parameters; each layer's init fills its own slice
// with the portable Rng of random.hpp. Biases always start at zero.
#pragma once

namespace chainlet {

// The distribution of the weights: Glorot (Xavier) uniform on [-a, a] with a = sqrt(6 / (fan_in +
// fan_out)), or normal with standard deviation sqrt(2 / (fan_in + fan_out)).
enum class InitKind { glorot_uniform, glorot_normal };

}  // namespace chainlet
