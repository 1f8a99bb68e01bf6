// Dense's first-inputs pass for layers of more than 4 inputs and outputs: against finite differences
// in double and bit for bit against the separate passes. Dense's derivative rules: test_dense.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/layers/dense.hpp"
#include "support.hpp"

namespace test_dense_one_pass_wide {

using namespace chainlet;

namespace {

// A layer of more than 4 inputs and outputs makes dz, db and its first 4 inputs' rows of dW in one pass
// over a chunk of 64 samples or more (gemm_nt_activation), then the other rows from dz: against finite
// differences, and dW and dx bit for bit against the separate passes (activation_pullback, gemm_nt,
// gemm_nn), db against row_sums_add to rounding.
template <class Layer>
void check_first_inputs_pass() {
    auto check = [&]<std::size_t In>() {
        using L = typename Layer::template bound<Shape<In>>;
        using Act = typename Layer::activation;
        constexpr std::size_t Out = L::out_size;
        for (std::size_t n : {64, 70, 131}) {
            INFO("In=" << In << " n=" << n);
            REQUIRE(test::layer_gradient_error<L, RuleChecks::off>(n, 40 + n) < 1e-6);
            const auto p = test::random_vector<float>(L::num_params, 50 + n, 0.5);
            const auto x = test::random_vector<float>(In * n, 60 + n);
            const auto dy0 = test::random_vector<float>(Out * n, 70 + n);
            std::vector<float> y(Out * n), saved(L::saved_per_sample * n + 1), scratch(L::scratch_per_sample * n + 1);
            L::forward(p.data(), x.data(), y.data(), saved.data(), n);
            std::vector<float> g(L::num_params, 0.0f), dy = dy0, dx(In * n);
            L::pullback(p.data(), g.data(), x.data(), y.data(), saved.data(), scratch.data(), dy.data(), dx.data(), n);
            // the separate passes, dz row by row (whole vectors in the vector form, the rest in the scalar
            // form, as the one pass makes it; exp-based activations' two forms may differ in the last bit)
            std::vector<float> dz = dy0, g2(L::num_params, 0.0f), dx2(In * n);
            const float* s = Act::derivative_from_output ? y.data() : saved.data();
            for (std::size_t o = 0; o < Out; ++o) kernels::activation_pullback<Act>(dz.data() + o * n, s + o * n, n);
            for (std::size_t i = 0; i < Out * n; ++i) REQUIRE(dy[i] == dz[i]);  // the dz left in dy
            kernels::gemm_nt(In, Out, n, x.data(), n, dz.data(), n, g2.data(), Out);
            kernels::gemm_nn<kernels::NoEpilogue, kernels::Init::zero>(In, n, Out, p.data(), Out, 1, dz.data(), n, dx2.data(), n);
            for (std::size_t i = 0; i < In * Out; ++i) REQUIRE(g[i] == g2[i]);
            for (std::size_t i = 0; i < In * n; ++i) REQUIRE(dx[i] == dx2[i]);
            if constexpr (L::num_params > In * Out) {
                // db sums in another order: within a few roundings of the sum of |dz| of its row
                kernels::row_sums_add(Out, n, dz.data(), n, g2.data() + In * Out);
                for (std::size_t o = 0; o < Out; ++o) {
                    double magnitude = 0;
                    for (std::size_t k = 0; k < n; ++k) magnitude += std::abs(dz[o * n + k]);
                    REQUIRE(std::abs(g[In * Out + o] - g2[In * Out + o]) <= 8 * 6e-8 * magnitude);
                }
            }
        }
    };
    check.template operator()<5>();
    check.template operator()<9>();
    check.template operator()<32>();
}

}  // namespace

TEMPLATE_TEST_CASE("Dense with more than 4 inputs and outputs: dz, db and the first inputs' dW in one pass",
                   "[dense][gradient]", (Dense<5, Tanh>), (Dense<16, Tanh>), (Dense<6, GELU>), (Dense<7>),
                   (DenseNoBias<9, ReLU>), (DenseNoBias<5, Softplus>)) {
    check_first_inputs_pass<TestType>();
}

}  // namespace test_dense_one_pass_wide
