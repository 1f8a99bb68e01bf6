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
#include "conv_reference.hpp"
#include "support.hpp"

namespace test_conv_same {

using namespace chainlet;

namespace {

// tol: 1e-6 for smooth activations. With ReLU a perturbation of 1e-5 can move a pre-activation across
// the kink, where the finite difference itself is off by a little; 1e-5 leaves room for that.
template <std::size_t H, std::size_t W, std::size_t C, std::size_t KH, std::size_t KW, std::size_t OC, class Act, Padding Pad>
void check_conv(double tol = 1e-6) {
    using L = typename Conv<KH, KW, OC, Act, Pad>::template bound<Shape<H, W, C>>;
    for (std::size_t n : {1, 3, 17}) {
        INFO("H=" << H << " W=" << W << " C=" << C << " K=" << KH << "x" << KW << " OC=" << OC << " n=" << n
                  << " same=" << (Pad == Padding::same));
        REQUIRE(test::layer_gradient_error<L>(n, 100 + n) < tol);
        const auto p = test::random_vector(L::num_params, 5, 0.5);
        const auto x = test::random_vector(L::in_size * n, 6);
        std::vector<double> y(L::out_size * n), saved(L::saved_per_sample * n);
        L::forward(p.data(), x.data(), y.data(), saved.data(), n);
        REQUIRE(test::max_rel_diff(y, test::reference_forward<L, H, W, C, KH, KW, OC, Act>(p, x, n)) < 1e-12);
    }
}

}  // namespace

TEST_CASE("Conv gradients (double, finite differences) and forward pass, same padding", "[conv][gradient]") {
    check_conv<7, 6, 1, 3, 3, 2, Identity, Padding::same>();
    check_conv<6, 5, 3, 5, 5, 4, Sigmoid, Padding::same>();
    check_conv<5, 6, 3, 3, 3, 19, Tanh, Padding::same>();  // one sample: vector tiles and tails along 19 channels
}

}  // namespace test_conv_same
