// Dense's one-pass pullbacks against finite differences in double and float against double: layers of
// 1-4 inputs (gemm_nt_activation) and of 1-4 outputs (gemm_nt_nn_few). The first-inputs pass of wider
// layers is in test_dense_one_pass_wide.cpp. Dense's derivative rules: test_dense.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/layers/dense.hpp"
#include "support.hpp"

namespace test_dense_one_pass {

using namespace chainlet;

namespace {

template <class Layer>
void check_few_inputs() {
    auto check = [&]<std::size_t In>() {
        using L = typename Layer::template bound<Shape<In>>;
        for (std::size_t n : {64, 70, 131}) {
            INFO("In=" << In << " n=" << n);
            REQUIRE(test::layer_gradient_error<L, RuleChecks::off>(n, 20 + n) < 1e-6);
        }
    };
    check.template operator()<1>();
    check.template operator()<3>();
    check.template operator()<4>();
}

// A layer of 1-4 outputs (and more than 4 inputs) pulls a chunk of 64 samples or more back with its
// weight and input gradients in one pass (gemm_nt_nn_few), and its weight gradient has the same bits
// without an input gradient (the checker runs both).
template <class Layer>
void check_few_outputs() {
    auto check = [&]<std::size_t In>() {
        using L = typename Layer::template bound<Shape<In>>;
        for (std::size_t n : {64, 70, 131}) {
            INFO("In=" << In << " n=" << n);
            REQUIRE(test::layer_gradient_error<L, RuleChecks::off>(n, 30 + n) < 1e-6);
        }
    };
    check.template operator()<5>();
    check.template operator()<16>();
    check.template operator()<19>();
}

}  // namespace

TEMPLATE_TEST_CASE("Dense with 1-4 inputs: the one-pass pullback of a chunk matches finite differences",
                   "[dense][gradient]", (Dense<5, Tanh>), (Dense<6, Softplus>), (Dense<17>), (DenseNoBias<3, ReLU>),
                   (DenseNoBias<9, GELU>)) {
    check_few_inputs<TestType>();
}

TEMPLATE_TEST_CASE("Dense with 1-4 outputs: the one-pass pullback of a chunk matches finite differences",
                   "[dense][gradient]", (Dense<1>), (Dense<4>), (Dense<3, Tanh>), (DenseNoBias<2, Softplus>),
                   (Dense<4, ReLU>)) {
    check_few_outputs<TestType>();
}

}  // namespace test_dense_one_pass
