// A chain used inside an Eigen computation: gradient descent on residuals, then a linear least-squares
// solve for the last layer, whose optimality shows as a zero gradient; fit on Eigen objects.
#include <catch2/catch.hpp>

#include "chainlet/chainlet.hpp"
#include "chainlet/interop/eigen.hpp"
// clang-format off
#include <Eigen/Dense>
// clang-format on
#include <vector>

#include "support.hpp"

namespace test_eigen_fit {

using namespace chainlet;

namespace {

using Hidden = Chain<Input<2>, Dense<12, Tanh>>;
using Net = Chain<Input<2>, Dense<12, Tanh>, Dense<1>>;
// The hidden layer's parameters are the first ones of Net's, so Hidden can evaluate Net's features.
static_assert(Net::param_offset[1] == Hidden::num_params);

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// n samples of y = sin(2 x0) + x0 x1, as columns.
template <class T>
std::pair<Mat<T>, Mat<T>> make_data(Eigen::Index n) {
    Mat<T> x(2, n), y(1, n);
    const auto v = test::random_vector<T>(static_cast<std::size_t>(2 * n), 5);
    for (Eigen::Index s = 0; s < n; ++s) {
        x(0, s) = v[static_cast<std::size_t>(2 * s)];
        x(1, s) = v[static_cast<std::size_t>(2 * s + 1)];
        y(0, s) = std::sin(2 * x(0, s)) + x(0, s) * x(1, s);
    }
    return {x, y};
}

}  // namespace

TEST_CASE("Eigen: a chain inside an Eigen least-squares computation", "[eigen][fit]") {
    // references, not a structured binding: the lambdas below use x and y, and clang 14 cannot capture a
    // structured binding (C++20 allows it; clang 16 implements it)
    const auto data = make_data<double>(400);
    const Mat<double>& x = data.first;
    const Mat<double>& y = data.second;
    Vec<double> p(Net::num_params), g(Net::num_params);
    init_params<Net>(as_span(p), 2);
    Mat<double> yhat(1, 400);

    // 1. Plain gradient descent written in Eigen: residual r = yhat - y, loss = |r|^2 / n, p -= lr g.
    auto loss_from_residual = [&] {
        predict<Net>(p, x, yhat);
        return (yhat - y).squaredNorm() / 400.0;
    };
    const double initial = loss_from_residual();
    for (int step = 0; step < 300; ++step) {
        const double l = value_and_gradient<Net>(p, g, x, y, SquaredError{});
        if (step == 0) REQUIRE(l == Approx(initial).epsilon(1e-12));
        p -= 0.05 * g;
    }
    const double descended = loss_from_residual();
    REQUIRE(descended < 0.5 * initial);

    // 2. Keep the hidden layer, solve the output layer by linear least squares on its features:
    //    minimise |w^T H + b - y|^2 over (w, b), H = hidden features (12 x n), from Hidden on p's prefix.
    Mat<double> h(12, 400);
    predict<Hidden>(p.head(Hidden::num_params), x, h);
    Mat<double> a(400, 13);
    a.leftCols(12) = h.transpose();
    a.col(12).setOnes();
    const Vec<double> wb = a.colPivHouseholderQr().solve(y.transpose());
    // Dense<1> stores W (here 12 weights, W[i * 1 + 0]) and then its bias: exactly wb's order.
    p.segment(Net::param_offset[1], 13) = wb;
    const double solved = value_and_gradient<Net>(p, g, x, y, SquaredError{});
    REQUIRE(solved <= descended);
    REQUIRE(solved == Approx((a * wb - y.transpose()).squaredNorm() / 400.0).epsilon(1e-10));
    // At the least-squares solution the normal equations hold: the output layer's gradient vanishes
    // (relative to the gradient's size before the solve), the hidden layer's does not.
    REQUIRE(g.segment(Net::param_offset[1], 13).norm() < 1e-9);
    REQUIRE(g.head(Hidden::num_params).norm() > 1e-6);

    // 3. fit() with Eigen arguments continues from there.
    Adam<double> opt(1e-3);
    FitOptions o;
    o.epochs = 50;
    o.batch = 100;
    o.threads = 1;
    fit<Net>(p, SquaredError{}, x, y, opt, o);
    REQUIRE(loss_from_residual() < solved);
}

namespace {

// A fit extension (see WholeBatch in train.hpp): every batch whole, counting the reductions.
struct CountingSplit {
    int* reductions;
    WholeBatch::Slice share(std::size_t m) const { return {0, m}; }
    template <class T>
    void reduce(std::span<T>, std::size_t, std::size_t) const {
        ++*reductions;
    }
};

}  // namespace

TEST_CASE("Eigen: fit passes its split argument to train.hpp's fit", "[eigen][fit]") {
    const auto [x, y] = make_data<double>(40);
    Vec<double> p(Net::num_params);
    init_params<Net>(as_span(p), 4);
    std::vector<double> q(p.data(), p.data() + p.size());
    FitOptions o;
    o.epochs = 2;
    o.batch = 10;
    o.threads = 1;
    int eigen_reductions = 0, span_reductions = 0;
    Adam<double> opt_eigen(1e-2), opt_span(1e-2);
    fit<Net>(p, SquaredError{}, x, y, opt_eigen, o, CountingSplit{&eigen_reductions});
    fit<Net>(q, SquaredError{}, as_span(x), as_span(y), opt_span, o, CountingSplit{&span_reductions});
    REQUIRE(eigen_reductions == 8);  // 2 epochs of 4 batches
    REQUIRE(span_reductions == 8);
    REQUIRE(std::vector<double>(p.data(), p.data() + p.size()) == q);
}

}  // namespace test_eigen_fit
