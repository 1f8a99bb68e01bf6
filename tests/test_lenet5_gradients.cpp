// LeNet5: finite-difference gradients in double (a sample of parameters from every layer), and equal
// results from one chunk and from many chunks on several threads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_lenet5_gradients {

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

TEST_CASE("LeNet5: sampled parameter gradients match finite differences (double)", "[lenet5][gradient]") {
    const std::size_t n = 2;
    std::vector<double> p(LeNet5::num_params), g(LeNet5::num_params);
    init_params<LeNet5>(p, 7);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.01 * std::sin(static_cast<double>(i));
    const auto x = test::random_vector(n * LeNet5::in_size, 8);
    const std::vector<std::int32_t> y = {3, 7};
    value_and_gradient<LeNet5>(p, g, x, y, SoftmaxCrossEntropy{});
    auto f = [&](const std::vector<double>& pp) { return mean_cross_entropy<LeNet5>(pp, x, y); };
    double worst = 0;
    Rng rng(1);
    for (std::size_t layer = 0; layer < LeNet5::num_layers; ++layer) {
        const std::size_t begin = LeNet5::param_offset[layer], count = LeNet5::layer_params[layer];
        for (std::size_t t = 0; t < std::min<std::size_t>(count, 40); ++t) {
            const std::size_t i = begin + rng.below(count);
            auto q = p;
            const double h = 1e-5;
            q[i] = p[i] + h;
            const double up = f(q);
            q[i] = p[i] - h;
            const double fd = (up - f(q)) / (2 * h);
            worst = test::worse(worst, std::abs(g[i] - fd) / std::max(std::abs(fd), 1e-3));
        }
    }
    REQUIRE(worst < 1e-6);
}

TEST_CASE("LeNet5: many chunks on 2 threads give the per-sample gradients' mean, same bits on 1 and 3 threads",
          "[lenet5][parallel]") {
    const std::size_t n = 3 * Workspace<LeNet5, float>::chunk + 5;
    std::vector<float> p(LeNet5::num_params), g1(p.size()), g2(p.size()), g3(p.size()), gs(p.size());
    init_params<LeNet5>(p, 2);
    const auto x = test::random_vector<float>(n * 784, 3);
    std::vector<std::int32_t> y(n);
    for (std::size_t s = 0; s < n; ++s) y[s] = static_cast<std::int32_t>(s % 10);
    const float l2 = value_and_gradient<LeNet5>(p, g2, x, y, SoftmaxCrossEntropy{}, 2);
    const float l1 = value_and_gradient<LeNet5>(p, g1, x, y, SoftmaxCrossEntropy{}, 1);
    const float l3 = value_and_gradient<LeNet5>(p, g3, x, y, SoftmaxCrossEntropy{}, 3);
    REQUIRE(l1 == l2);
    REQUIRE(l1 == l3);
    REQUIRE(g1 == g2);
    REQUIRE(g1 == g3);
    std::vector<double> mean(p.size(), 0.0);
    for (std::size_t s = 0; s < n; ++s) {
        value_and_gradient<LeNet5>(std::span<const float>(p), gs, std::span<const float>(x).subspan(s * 784, 784),
                                   std::span<const std::int32_t>(y).subspan(s, 1), SoftmaxCrossEntropy{});
        for (std::size_t j = 0; j < p.size(); ++j) mean[j] += gs[j] / static_cast<double>(n);
    }
    double scale = 0;
    for (double v : mean) scale = std::max(scale, std::abs(v));
    for (std::size_t j = 0; j < p.size(); ++j) REQUIRE(std::abs(g1[j] - mean[j]) < 1e-4 * scale);
}

}  // namespace test_lenet5_gradients
