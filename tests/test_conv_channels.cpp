// Conv: finite-difference gradients in double and the forward pass against a plain scalar convolution
// for a 1 x 1 kernel, even kernels with same padding (one more row and column of padding at the
// bottom/right), and output channels of one and two whole vectors (the weight gradient along the
// channels, Conv::along_channels).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "chainlet/layers/conv.hpp"
#include "conv_gradient_check.hpp"
#include "support.hpp"

namespace test_conv_channels {

using namespace chainlet;

using test::check_conv;

TEST_CASE("Conv gradients (double, finite differences) and forward pass, 1 x 1 and even kernels, whole vectors of channels", "[conv][gradient]") {
    check_conv<5, 5, 2, 1, 1, 3, GELU, Padding::valid>();
    // one and two vectors of output channels in double with AVX-512 (the weight gradient along the
    // channels, Conv::along_channels): 3 input channels per tile, odd output width 5
    check_conv<6, 7, 3, 3, 3, 8, Tanh, Padding::valid>();
    check_conv<5, 6, 2, 2, 4, 3, Softplus, Padding::same>();  // even kernel: one more at the bottom/right
    check_conv<6, 8, 2, 2, 5, 16, Softplus, Padding::same>();  // along the channels, 2 vectors in double
}

}  // namespace test_conv_channels
