// Conv with same padding: finite-difference gradients in double (odd image sizes, even kernels, one and
// several samples, with activations) and the forward pass against a plain scalar convolution.
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

namespace test_conv_same {

using namespace chainlet;

using test::check_conv;

TEST_CASE("Conv gradients (double, finite differences) and forward pass, same padding", "[conv][gradient]") {
    check_conv<7, 6, 1, 3, 3, 2, Identity, Padding::same>();
    check_conv<6, 5, 3, 5, 5, 4, Sigmoid, Padding::same>();
    check_conv<5, 6, 3, 3, 3, 19, Tanh, Padding::same>();  // one sample: vector tiles and tails along 19 channels
}

}  // namespace test_conv_same
