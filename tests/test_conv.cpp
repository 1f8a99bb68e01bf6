// Conv with valid padding: finite-difference gradients in double (odd image sizes, one and several
// samples, with activations), the forward pass against a plain scalar convolution, and the shapes. Same
// padding is in test_conv_same.cpp, 1 x 1 and even kernels and the weight gradient along the channels
// in test_conv_channels.cpp, the pullback from rows in test_conv_pullback_rows.cpp, the one-sample
// route in test_conv_one_sample*.cpp, the convolution kernels against their scalar twins in
// test_conv_kernels*.cpp.
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

namespace test_conv {

using namespace chainlet;

using test::check_conv;

TEST_CASE("Conv gradients (double, finite differences) and forward pass, valid padding", "[conv][gradient]") {
    check_conv<7, 6, 1, 3, 3, 2, Identity, Padding::valid>();
    check_conv<9, 7, 3, 5, 5, 6, ReLU, Padding::valid>(1e-5);
    check_conv<6, 9, 2, 2, 3, 5, Tanh, Padding::valid>();
}

TEST_CASE("Conv shapes", "[conv]") {
    using A = Conv<5, 5, 6, ReLU>::bound<Shape<28, 28, 1>>;
    STATIC_REQUIRE(std::is_same_v<A::out_shape, Shape<24, 24, 6>>);
    STATIC_REQUIRE(A::num_params == 5 * 5 * 6 + 6);
    using B = Conv<5, 5, 6, ReLU, Padding::same>::bound<Shape<28, 28, 1>>;
    STATIC_REQUIRE(std::is_same_v<B::out_shape, Shape<28, 28, 6>>);
}

}  // namespace test_conv
