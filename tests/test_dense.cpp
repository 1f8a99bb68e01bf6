// Dense: finite-difference gradient checks in double (with and without bias, every activation, the
// one-sample route, the batched route, the one-pass route of layers with 1-4 inputs and the first-inputs
// pass of wider layers), and the
// forward pass against Eigen in float and double.
#include <catch2/catch.hpp>

// chainlet first: it includes the intrinsics headers with GCC 12's false uninitialised warnings
// silenced (see kernels/simd.hpp), which Eigen then reuses.
#include "chainlet/layers/dense.hpp"
// clang-format off
#include <Eigen/Dense>
// clang-format on
#include <cmath>
#include <vector>

#include "support.hpp"

namespace test_dense {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

namespace {

template <class Layer>
void check_gradients() {
    using L = typename Layer::template bound<Shape<7>>;
    for (std::size_t n : {1, 2, 5, 37}) {
        INFO("n=" << n);
        REQUIRE(test::layer_gradient_error<L>(n, 10 + n) < 1e-6);
    }
}

// A layer of 1-4 inputs pulls a chunk of 64 samples or more back in one pass (gemm_nt_activation), with
// and without an input gradient (the checker runs both) and in float against double.
template <class Layer>
void check_few_inputs() {
    auto check = [&]<std::size_t In>() {
        using L = typename Layer::template bound<Shape<In>>;
        for (std::size_t n : {64, 70, 131}) {
            INFO("In=" << In << " n=" << n);
            REQUIRE(test::layer_gradient_error<L>(n, 20 + n) < 1e-6);
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
            REQUIRE(test::layer_gradient_error<L>(n, 30 + n) < 1e-6);
        }
    };
    check.template operator()<5>();
    check.template operator()<16>();
    check.template operator()<19>();
}

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
            REQUIRE(test::layer_gradient_error<L>(n, 40 + n) < 1e-6);
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

template <class Layer, class T>
void check_against_eigen() {
    constexpr std::size_t In = 9, Out = 13;
    using L = typename Layer::template bound<Shape<In>>;
    using Act = typename Layer::activation;
    for (std::size_t n : {1, 3, 20}) {
        const auto p = test::random_vector<T>(L::num_params, 3, 0.5);
        const auto x = test::random_vector<T>(In * n, 4);  // feature-major: In x n
        std::vector<T> y(Out * n), saved(L::saved_per_sample * n + 1);
        L::forward(p.data(), x.data(), y.data(), saved.data(), n);
        // Reference: Z = W X + b with W(o, i) = p[i * Out + o]
        using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        const Eigen::Map<const Eigen::Matrix<T, In, Out, Eigen::RowMajor>> Wt(p.data());
        const Eigen::Map<const Mat> X(x.data(), In, n);
        Mat Z = Wt.transpose() * X;
        if (L::num_params > In * Out)
            Z.colwise() += Eigen::Map<const Eigen::Matrix<T, Out, 1>>(p.data() + In * Out);
        for (std::size_t o = 0; o < Out; ++o)
            for (std::size_t s = 0; s < n; ++s)
                REQUIRE(y[o * n + s] == Approx(Act::value(Z(o, s))).epsilon(sizeof(T) == 4 ? 1e-5 : 1e-12).margin(1e-6));
    }
}

}  // namespace

TEMPLATE_TEST_CASE("Dense gradients match finite differences (double)", "[dense][gradient]", (Dense<5>),
                   (Dense<5, ReLU>), (Dense<5, Tanh>), (Dense<5, Sigmoid>), (Dense<5, Softplus>), (Dense<5, GELU>),
                   (DenseNoBias<5>), (DenseNoBias<5, Tanh>), (DenseNoBias<19, GELU>), (Dense<33, Tanh>)) {
    check_gradients<TestType>();
}

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

TEMPLATE_TEST_CASE("Dense with more than 4 inputs and outputs: dz, db and the first inputs' dW in one pass",
                   "[dense][gradient]", (Dense<5, Tanh>), (Dense<16, Tanh>), (Dense<6, GELU>), (Dense<7>),
                   (DenseNoBias<9, ReLU>), (DenseNoBias<5, Softplus>)) {
    check_first_inputs_pass<TestType>();
}

TEMPLATE_TEST_CASE("Dense forward matches Eigen", "[dense]", (Dense<13>), (Dense<13, Tanh>), (Dense<13, GELU>),
                   (DenseNoBias<13, ReLU>)) {
    check_against_eigen<TestType, float>();
    check_against_eigen<TestType, double>();
}

TEST_CASE("Dense parameter layout and counts", "[dense]") {
    using L = Dense<3, Tanh>::bound<Shape<4>>;
    STATIC_REQUIRE(L::num_params == 4 * 3 + 3);
    STATIC_REQUIRE(DenseNoBias<3>::bound<Shape<4>>::num_params == 12);
    STATIC_REQUIRE(L::saved_per_sample == 0);  // tanh' from y
    STATIC_REQUIRE(L::scratch_per_sample == 3);  // room for dz transposed
    STATIC_REQUIRE(Dense<3, GELU>::bound<Shape<4>>::saved_per_sample == 3);  // z
    // W[i * Out + o] then b: a unit weight from input 2 to output 1 and bias 0.5 on output 1
    std::vector<double> p(L::num_params, 0.0);
    p[2 * 3 + 1] = 1.0;
    p[12 + 1] = 0.5;
    const std::vector<double> x = {0, 0, 0.25, 0};
    std::vector<double> y(3);
    L::forward(p.data(), x.data(), y.data(), static_cast<double*>(nullptr), 1);
    REQUIRE(y[0] == 0.0);
    REQUIRE(y[1] == Approx(std::tanh(0.75)));
    REQUIRE(y[2] == 0.0);
}

}  // namespace test_dense
