// The Conv layer checks shared by test_conv.cpp, test_conv_same.cpp and test_conv_channels.cpp: the
// finite-difference gradients in double and the forward pass against the definition. (The derivative
// passes' rules are test_conv_rules.cpp's.)
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "chainlet/layers/conv.hpp"
#include "conv_reference.hpp"
#include "support.hpp"

namespace test {

// tol: 1e-6 for smooth activations. With ReLU a perturbation of 1e-5 can move a pre-activation across
// the kink, where the finite difference itself is off by a little; 1e-5 leaves room for that.
template <std::size_t H, std::size_t W, std::size_t C, std::size_t KH, std::size_t KW, std::size_t OC, class Act, chainlet::Padding Pad>
void check_conv(double tol = 1e-6) {
    using L = typename chainlet::Conv<KH, KW, OC, Act, Pad>::template bound<chainlet::Shape<H, W, C>>;
    for (std::size_t n : {1, 3, 17}) {
        INFO("H=" << H << " W=" << W << " C=" << C << " K=" << KH << "x" << KW << " OC=" << OC << " n=" << n
                  << " same=" << (Pad == chainlet::Padding::same));
        REQUIRE(layer_gradient_error<L, chainlet::RuleChecks::off>(n, 100 + n) < tol);
        const auto p = random_vector(L::num_params, 5, 0.5);
        const auto x = random_vector(L::in_size * n, 6);
        std::vector<double> y(L::out_size * n), saved(L::saved_per_sample * n);
        L::forward(p.data(), x.data(), y.data(), saved.data(), n);
        REQUIRE(max_rel_diff(y, reference_forward<L, H, W, C, KH, KW, OC, Act>(p, x, n)) < 1e-12);
    }
}

}  // namespace test
