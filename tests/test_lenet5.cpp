// Whole convolutional chains: LeNet5's shapes and parameter count, and finite-difference gradients in
// double of a small conv chain (every parameter). LeNet5's own gradients and its many chunks on several
// threads are in test_lenet5_gradients.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_lenet5 {

using namespace chainlet;

using LeNet5 = Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2, 2>, Conv<5, 5, 16, ReLU>, MaxPool<2, 2>, Flatten,
                     Dense<120, ReLU>, Dense<84, ReLU>, Dense<10>>;
using SmallConv = Chain<Input<12, 11, 2>, Conv<3, 3, 4, Tanh>, MaxPool<2>, Conv<3, 3, 5, Softplus, Padding::same>,
                        MaxPool<2>, Flatten, Dense<7, Sigmoid>, Dense<3>>;

// The mean softmax cross-entropy from its definition, on predict's logits: the finite differences below
// need the loss only, and a forward pass costs about a third of value_and_gradient's forward + pullback.
template <class Net>
double mean_cross_entropy(const std::vector<double>& p, const std::vector<double>& x, const std::vector<std::int32_t>& y) {
    std::vector<double> z(y.size() * Net::out_size);
    predict<Net>(p, x, z);
    double sum = 0;
    for (std::size_t s = 0; s < y.size(); ++s) {
        const double* zs = z.data() + s * Net::out_size;
        const double m = *std::max_element(zs, zs + Net::out_size);
        double e = 0;
        for (std::size_t k = 0; k < Net::out_size; ++k) e += std::exp(zs[k] - m);
        sum += m + std::log(e) - zs[y[s]];
    }
    return sum / static_cast<double>(y.size());
}

TEST_CASE("LeNet5: shapes and parameter count", "[lenet5]") {
    STATIC_REQUIRE(LeNet5::num_params == 44426);
    STATIC_REQUIRE(LeNet5::width[1] == 24 * 24 * 6);
    STATIC_REQUIRE(LeNet5::width[2] == 12 * 12 * 6);
    STATIC_REQUIRE(LeNet5::width[3] == 8 * 8 * 16);
    STATIC_REQUIRE(LeNet5::width[5] == 256);
    STATIC_REQUIRE(LeNet5::out_size == 10);
}

TEST_CASE("Small conv chain: every parameter's gradient matches finite differences (double)", "[lenet5][gradient]") {
    for (std::size_t n : {1, 3}) {
        std::vector<double> p(SmallConv::num_params), g(SmallConv::num_params);
        init_params<SmallConv>(p, 3, InitKind::glorot_normal);
        for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.05 * std::cos(static_cast<double>(i));
        const auto x = test::random_vector(n * SmallConv::in_size, 4);
        std::vector<std::int32_t> y(n);
        for (std::size_t s = 0; s < n; ++s) y[s] = static_cast<std::int32_t>(s % 3);
        value_and_gradient<SmallConv>(p, g, x, y, SoftmaxCrossEntropy{});
        INFO("n=" << n);
        REQUIRE(test::gradient_error(
                    [&](const std::vector<double>& pp) { return mean_cross_entropy<SmallConv>(pp, x, y); }, p, g) <
                1e-6);
    }
}

}  // namespace test_lenet5
