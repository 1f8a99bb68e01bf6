// The user-defined loss of docs/api.md ("Your own loss"), verbatim: it satisfies chainlet::Loss, its
// gradient through a whole chain matches finite differences in double (with residuals on both sides
// of the kink), and fit() trains with it in float.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

// --- from docs/api.md ---
// l_s = sum_o huber(yhat_o - y_o), huber(d) = d^2 / 2 for |d| <= 1 and |d| - 1/2 beyond.
namespace test_user_loss {  // several test files make one program (tests/CMakeLists.txt)

struct Huber {
    template <class T>
    using target = T;  // one target value per output
    static constexpr std::size_t targets_per_sample(std::size_t out) { return out; }
    template <class T>
    static void check_targets(std::span<const T>, std::size_t) {}  // any value is a valid target
    template <class T>
    static T value_and_gradient(const T* yhat, const T* y, T* dyhat, std::size_t out, std::size_t n, T scale) {
        T sum = 0;
        for (std::size_t i = 0; i < out * n; ++i) {  // elementwise, so the layout does not matter
            const T d = yhat[i] - y[i];
            sum += std::abs(d) <= 1 ? d * d / 2 : std::abs(d) - T(0.5);
            dyhat[i] = scale * std::clamp(d, T(-1), T(1));
        }
        return sum;
    }
};
static_assert(chainlet::Loss<Huber, float> && chainlet::Loss<Huber, double>);
// --- end ---

using Net = chainlet::Chain<chainlet::Input<3>, chainlet::Dense<8, chainlet::Tanh>, chainlet::Dense<2>>;

TEST_CASE("user loss (Huber, docs/api.md): chain gradient matches finite differences (double)", "[loss][gradient]") {
    for (std::size_t n : {1, 7, 40}) {
        std::vector<double> p(Net::num_params), g(Net::num_params), scratch(Net::num_params);
        chainlet::init_params<Net>(p, 2);
        const auto x = test::random_vector(3 * n, 3);
        const auto y = test::random_vector(2 * n, 4, 2.0);  // residuals on both sides of |d| = 1
        std::size_t outside = 0;
        std::vector<double> yhat(2 * n);
        chainlet::predict<Net>(p, x, yhat);
        for (std::size_t i = 0; i < y.size(); ++i) outside += std::abs(yhat[i] - y[i]) > 1;
        if (n == 40) REQUIRE(outside > 0);
        chainlet::value_and_gradient<Net>(p, g, x, y, Huber{});
        INFO("n=" << n);
        REQUIRE(test::gradient_error(
                    [&](const std::vector<double>& pp) { return chainlet::value_and_gradient<Net>(pp, scratch, x, y, Huber{}); },
                    p, g) < 1e-6);
    }
}

TEST_CASE("user loss (Huber): fit trains with it in float", "[loss][fit]") {
    const std::size_t n = 300;
    const auto x = test::random_vector<float>(3 * n, 5);
    std::vector<float> y(2 * n);
    for (std::size_t s = 0; s < n; ++s) {
        y[2 * s] = 3 * x[3 * s] - x[3 * s + 2];
        y[2 * s + 1] = std::tanh(x[3 * s + 1]);
    }
    std::vector<float> p(Net::num_params), g(Net::num_params);
    chainlet::init_params<Net>(p, 6);
    const float before = chainlet::value_and_gradient<Net>(p, g, x, y, Huber{});
    chainlet::Adam opt(1e-2f);
    chainlet::FitOptions o;
    o.epochs = 30;
    o.batch = 32;
    chainlet::fit<Net>(p, Huber{}, x, y, opt, o);
    REQUIRE(chainlet::value_and_gradient<Net>(p, g, x, y, Huber{}) < 0.2f * before);
}

}  // namespace test_user_loss
