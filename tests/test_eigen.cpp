// Eigen interop: Eigen objects passed to predict / value_and_gradient give the span API's results bit
// for bit, are read and written in place (pointer identity), wrong layouts are rejected. A chain inside
// an Eigen computation and fit on Eigen objects are in test_eigen_fit.cpp.
#include <catch2/catch.hpp>

#include "chainlet/chainlet.hpp"
#include "chainlet/interop/eigen.hpp"
// clang-format off
#include <Eigen/Dense>
// clang-format on
#include <vector>

#include "support.hpp"

namespace test_eigen {

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

TEST_CASE("Eigen: as_span views the object's own storage, wrong layouts are rejected", "[eigen]") {
    Mat<double> m(3, 5);
    const auto s = as_span(m);
    STATIC_REQUIRE(std::is_same_v<decltype(s), const std::span<double>>);
    REQUIRE(s.data() == m.data());
    REQUIRE(s.size() == 15);
    const Mat<double>& cm = m;
    STATIC_REQUIRE(std::is_same_v<decltype(as_span(cm)), std::span<const double>>);
    REQUIRE(as_span(m.middleCols(1, 3)).data() == &m(0, 1));  // whole columns: contiguous
    REQUIRE(as_span(m.col(2)).data() == &m(0, 2));
    REQUIRE_THROWS_WITH(as_span(m.topRows(2)), Catch::Contains("is not contiguous"));
    REQUIRE_THROWS_WITH(as_span(m.row(1)), Catch::Contains("is not contiguous"));
    // Compile-time rejections, as the concept sees them.
    STATIC_REQUIRE(EigenContiguous<Mat<double>&>);
    STATIC_REQUIRE(EigenContiguous<Eigen::Map<const Vec<float>>>);
    STATIC_REQUIRE(EigenContiguous<Eigen::Matrix<int, 1, Eigen::Dynamic>>);  // a row vector is fine
    STATIC_REQUIRE(!EigenContiguous<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>);
    STATIC_REQUIRE(EigenContiguous<decltype(Eigen::Matrix<double, 4, 3, Eigen::RowMajor>().transpose())>);
    STATIC_REQUIRE(!EigenContiguous<decltype(m * m.transpose())>);  // no storage
    STATIC_REQUIRE(!EigenContiguous<Eigen::Map<Vec<double>, 0, Eigen::InnerStride<2>>>);

    std::vector<float> buf(12);
    auto v = as_eigen(std::span<float>(buf));
    REQUIRE(v.data() == buf.data());
    auto x = as_eigen(std::span<const float>(buf), 4);
    REQUIRE((x.rows() == 4 && x.cols() == 3 && x.data() == buf.data()));
    REQUIRE_THROWS_WITH(as_eigen(std::span<float>(buf), 5), Catch::Contains("12 values"));
}

TEMPLATE_TEST_CASE("Eigen: predict and value_and_gradient on Eigen objects equal the span API, in place", "[eigen]",
                   float, double) {
    using T = TestType;
    const auto [x, y] = make_data<T>(300);
    Vec<T> p(Net::num_params), g(Net::num_params);
    init_params<Net>(as_span(p), 4);
    const T* p_data = p.data();
    const T* g_data = g.data();

    // predict into an Eigen matrix, against predict into a std::vector from std::vector inputs.
    Mat<T> out(1, 300);
    const T* out_data = out.data();
    predict<Net>(p, x, out, 2);
    REQUIRE(out.data() == out_data);
    const std::vector<T> pv(p.data(), p.data() + p.size()), xv(x.data(), x.data() + x.size());
    std::vector<T> ov(300);
    predict<Net>(pv, xv, ov, 2);
    for (std::size_t s = 0; s < 300; ++s) REQUIRE(out(0, static_cast<Eigen::Index>(s)) == ov[s]);

    // Writing into a block of whole columns writes those columns of the matrix and nothing else.
    Mat<T> wide = Mat<T>::Constant(1, 310, T(-7));
    predict<Net>(p, x, wide.middleCols(5, 300));
    REQUIRE(wide(0, 4) == T(-7));
    REQUIRE(wide(0, 305) == T(-7));
    REQUIRE(wide.middleCols(5, 300) == out);

    // value_and_gradient: Eigen everywhere, mixed, and the span API agree bit for bit.
    const T l1 = value_and_gradient<Net>(p, g, x, y, SquaredError{});
    REQUIRE((p.data() == p_data && g.data() == g_data));
    std::vector<T> gv(Net::num_params);
    const T l2 = value_and_gradient<Net>(pv, gv, xv, std::vector<T>(y.data(), y.data() + y.size()), SquaredError{});
    REQUIRE(l1 == l2);
    for (std::size_t j = 0; j < gv.size(); ++j) REQUIRE(g(static_cast<Eigen::Index>(j)) == gv[j]);
    Workspace<Net, T> ws;
    std::vector<T> gm(Net::num_params);
    const T l3 = value_and_gradient<Net>(ws, pv, gm, x, y, SquaredError{}, 2);
    REQUIRE(l3 == l1);
    REQUIRE(gm == gv);
    // Labels as an integer row vector, for a classification loss.
    using Cls = Chain<Input<2>, Dense<3>>;
    Vec<T> pc(Cls::num_params), gc(Cls::num_params);
    init_params<Cls>(as_span(pc), 1);
    Eigen::Matrix<std::int32_t, 1, Eigen::Dynamic> labels(300);
    for (Eigen::Index s = 0; s < 300; ++s) labels(s) = static_cast<std::int32_t>(s % 3);
    std::vector<std::int32_t> lv(labels.data(), labels.data() + 300);
    std::vector<T> gcv(Cls::num_params);
    REQUIRE(value_and_gradient<Cls>(pc, gc, x, labels, SoftmaxCrossEntropy{}) ==
            value_and_gradient<Cls>(as_span(pc), gcv, xv, lv, SoftmaxCrossEntropy{}));
}

TEST_CASE("Eigen: shape errors say what was expected", "[eigen][errors]") {
    Vec<double> p(Net::num_params), g(Net::num_params);
    init_params<Net>(as_span(p), 1);
    Mat<double> x4(4, 10), out(1, 20), y(1, 20);  // 4 x 10 has as many values as 2 x 20 ...
    x4.setZero();
    REQUIRE_THROWS_WITH(predict<Net>(p, x4, out), Catch::Contains("the input matrix has 4 rows, expected 2"));
    Mat<double> x(2, 20), out2(2, 10);  // ... and so has 2 x 10 as 1 x 20, but not as one output per column
    x.setZero();
    REQUIRE_THROWS_WITH(predict<Net>(p, x, out2), Catch::Contains("the output matrix has 2 rows, expected 1"));
    Mat<double> big(3, 20);
    big.setZero();
    REQUIRE_THROWS_WITH(predict<Net>(p, big.topRows(2), out), Catch::Contains("is not contiguous"));
    Vec<double> short_g(5);
    REQUIRE_THROWS_WITH(value_and_gradient<Net>(p, short_g, x, y, SquaredError{}),
                        Catch::Contains("gradient buffer has 5 elements, expected 49"));
}

}  // namespace test_eigen
