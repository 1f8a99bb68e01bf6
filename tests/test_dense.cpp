// Dense: finite-difference gradient checks in double (with and without bias, every activation, the
// one-sample route and the batched route), the forward pass against Eigen in float and double, and the
// parameter layout. The one-pass pullbacks of narrow and wide layers are in test_dense_one_pass.cpp.
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

namespace test_dense {

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
