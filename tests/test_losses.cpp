// Each loss: value against a plain per-sample formula, gradient against finite differences (double),
// and vector paths exercised on odd chunk sizes.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/losses.hpp"
#include "support.hpp"

namespace test_losses {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

namespace {

// yhat, y feature-major (out x n).
double squared_reference(const std::vector<double>& yhat, const std::vector<double>& y) {
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += (yhat[i] - y[i]) * (yhat[i] - y[i]);
    return s;
}
double absolute_reference(const std::vector<double>& yhat, const std::vector<double>& y) {
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += std::abs(yhat[i] - y[i]);
    return s;
}
double crossentropy_reference(const std::vector<double>& yhat, const std::vector<std::int32_t>& y, std::size_t out) {
    const std::size_t n = y.size();
    double s = 0;
    for (std::size_t t = 0; t < n; ++t) {
        double z = 0;
        for (std::size_t o = 0; o < out; ++o) z += std::exp(yhat[o * n + t]);
        s += std::log(z) - yhat[static_cast<std::size_t>(y[t]) * n + t];
    }
    return s;
}

template <class L, class Y, class Ref>
void check_loss(std::size_t out, std::size_t n, const Y& y, Ref ref) {
    const auto yhat = test::random_vector(out * n, out * n, 2.0);
    std::vector<double> g(out * n);
    const double v = L::template value_and_gradient<double>(yhat.data(), y.data(), g.data(), out, n, 0.5);
    REQUIRE(v == Approx(ref(yhat)).epsilon(1e-12));
    const double err = test::gradient_error([&](const std::vector<double>& yh) { return 0.5 * ref(yh); }, yhat, g);
    REQUIRE(err < 1e-6);
    // float path agrees with the double one
    std::vector<float> yhf(yhat.begin(), yhat.end()), gf(out * n);
    using TF = typename L::template target<float>;
    std::vector<TF> yf(y.begin(), y.end());
    const float vf = L::template value_and_gradient<float>(yhf.data(), yf.data(), gf.data(), out, n, 0.5f);
    REQUIRE(vf == Approx(v).epsilon(1e-5));
    REQUIRE(test::max_rel_diff(gf, g) < 1e-5);
}

}  // namespace

TEST_CASE("SquaredError: value and gradient", "[loss][gradient]") {
    for (std::size_t n : {1, 3, 17, 33})
        for (std::size_t out : {1, 4, 7}) {
            const auto y = test::random_vector(out * n, 99);
            check_loss<SquaredError>(out, n, y, [&](const std::vector<double>& yh) { return squared_reference(yh, y); });
        }
}

TEST_CASE("AbsoluteError: value and gradient", "[loss][gradient]") {
    for (std::size_t n : {1, 3, 17})
        for (std::size_t out : {1, 4}) {
            const auto y = test::random_vector(out * n, 98);
            check_loss<AbsoluteError>(out, n, y, [&](const std::vector<double>& yh) { return absolute_reference(yh, y); });
        }
}

TEST_CASE("SoftmaxCrossEntropy: value and gradient", "[loss][gradient]") {
    for (std::size_t n : {1, 3, 17, 33})
        for (std::size_t out : {2, 10}) {
            std::vector<std::int32_t> y(n);
            for (std::size_t t = 0; t < n; ++t) y[t] = static_cast<std::int32_t>((t * 7 + 3) % out);
            check_loss<SoftmaxCrossEntropy>(out, n, y,
                                            [&](const std::vector<double>& yh) { return crossentropy_reference(yh, y, out); });
        }
}

TEST_CASE("SoftmaxCrossEntropy: stable for large logits, rejects labels out of range", "[loss]") {
    std::vector<float> yhat = {1000.0f, -1000.0f, 0.0f}, g(3);
    std::vector<std::int32_t> y = {0};
    const float v = SoftmaxCrossEntropy::value_and_gradient<float>(yhat.data(), y.data(), g.data(), 3, 1, 1.0f);
    REQUIRE(v == Approx(0.0f).margin(1e-6));
    REQUIRE(std::isfinite(g[0]));
    std::vector<std::int32_t> bad = {0, 3};
    REQUIRE_THROWS_WITH(SoftmaxCrossEntropy::check_targets<float>(bad, 3),
                        Catch::Contains("label 3 of sample 1 is outside [0, 3)"));
}

}  // namespace test_losses
