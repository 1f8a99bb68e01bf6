// Float and double through every optimiser (each follows its formula in both), the data kernels, a
// convolutional chain's loss and gradient for every loss, and the whole training loop in double.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_float_double_training {

using namespace chainlet;

namespace {

template <class T, class U>
std::vector<T> cast(const std::vector<U>& v) {
    return std::vector<T>(v.begin(), v.end());
}

}  // namespace

namespace {

// p, g of odd length (vector loop + tail), three steps, against the optimiser's formula in double.
template <class T, class Opt, class Reference>
void check_optimiser(Opt opt, Reference reference) {
    const std::size_t n = 37;
    const auto p0 = cast<T>(cast<float>(test::random_vector(n, 5)));
    std::vector<T> p = p0;
    std::vector<double> pr(p0.begin(), p0.end()), state1(n, 0.0), state2(n, 0.0);
    for (int t = 1; t <= 3; ++t) {
        const auto g = cast<T>(cast<float>(test::random_vector(n, 10 + static_cast<std::uint64_t>(t))));
        opt.step(std::span<T>(p), std::span<const T>(g));
        for (std::size_t i = 0; i < n; ++i) reference(pr[i], static_cast<double>(g[i]), state1[i], state2[i], t);
        INFO("step " << t);
        REQUIRE(test::max_rel_diff(p, pr) < (sizeof(T) == 4 ? 1e-5 : 1e-13));
    }
}

}  // namespace

TEMPLATE_TEST_CASE("every optimiser follows its formula in float and double", "[float][double][optim]", float,
                   double) {
    using T = TestType;
    SECTION("SGD with momentum: v = mu v + g, p -= lr v") {
        check_optimiser<T>(SGD<T>(T(0.1), T(0.9)), [](double& p, double g, double& v, double&, int) {
            v = 0.9 * v + g;
            p -= 0.1 * v;
        });
    }
    auto adam = [](double wd) {
        return [wd](double& p, double g, double& m, double& v, int t) {
            p *= 1 - 0.01 * wd;
            m = 0.9 * m + 0.1 * g;
            v = 0.999 * v + 0.001 * g * g;
            p -= 0.01 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.999, t))) + 1e-8);
        };
    };
    SECTION("Adam") { check_optimiser<T>(Adam<T>(T(0.01)), adam(0.0)); }
    SECTION("AdamW, weight decay 0.1") { check_optimiser<T>(AdamW<T>(T(0.01), T(0.1)), adam(0.1)); }
}

TEMPLATE_TEST_CASE("data kernels: gather/scatter transposes and the byte conversion in float and double",
                   "[float][double][kernel]", float, double) {
    using T = TestType;
    const std::size_t F = 7;
    for (std::size_t n : {1, 5, 16, 37}) {
        const auto x = test::random_vector<T>(F * n, n);
        std::vector<T> t(F * n), back(F * n);
        kernels::gather_transpose(x.data(), F, nullptr, n, t.data());
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t f = 0; f < F; ++f) REQUIRE(t[f * n + s] == x[s * F + f]);
        kernels::scatter_transpose(t.data(), F, n, back.data());
        REQUIRE(back == x);
        std::vector<std::uint8_t> bytes(F * n);
        for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>((i * 37) % 256);
        const InputRows<T, std::uint8_t> rows{bytes.data(), T(1) / T(255), T(-0.5)};
        std::vector<std::uint32_t> index(n);
        for (std::size_t s = 0; s < n; ++s) index[s] = static_cast<std::uint32_t>((s * 3) % n);
        rows.gather(F, 0, index.data(), n, t.data());
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t f = 0; f < F; ++f)
                REQUIRE(t[f * n + s] == T(bytes[index[s] * F + f]) * (T(1) / T(255)) + T(-0.5));
    }
}

namespace {

using ConvNet = Chain<Input<8, 7, 2>, Conv<3, 3, 4, Tanh, Padding::same>, MaxPool<2>, Conv<2, 2, 3, ReLU>, Flatten,
                      Dense<6, GELU>, DenseNoBias<3>>;

template <class L, class Y>
void check_chain_float_double(const Y& y, std::size_t n) {
    std::vector<double> pd(ConvNet::num_params), gd(ConvNet::num_params);
    init_params<ConvNet>(pd, 8);
    const auto pf = cast<float>(pd);
    pd = cast<double>(pf);
    const auto xf = cast<float>(test::random_vector(n * ConvNet::in_size, 9));
    const std::vector<double> xd(xf.begin(), xf.end());
    std::vector<float> gf(ConvNet::num_params);
    using TF = typename L::template target<float>;
    const std::vector<TF> yf(y.begin(), y.end());
    const double ld = value_and_gradient<ConvNet>(pd, gd, xd, y, L{}, 2);
    const float lf = value_and_gradient<ConvNet>(pf, gf, xf, yf, L{}, 2);
    REQUIRE(lf == Approx(ld).epsilon(1e-5));
    // relative to the largest component: float rounding in sums of many terms
    double largest = 0;
    for (double v : gd) largest = std::max(largest, std::abs(v));
    for (std::size_t j = 0; j < gd.size(); ++j) REQUIRE(std::abs(gf[j] - gd[j]) < 1e-4 * largest);
}
}  // namespace

TEST_CASE("a conv chain gives the same loss and gradient in float and double, for every loss",
          "[float][double][chain]") {
    const std::size_t n = 70;  // several chunks in neither type
    check_chain_float_double<SquaredError>(test::random_vector(n * 3, 1), n);
    check_chain_float_double<AbsoluteError>(test::random_vector(n * 3, 2), n);
    std::vector<std::int32_t> labels(n);
    for (std::size_t s = 0; s < n; ++s) labels[s] = static_cast<std::int32_t>((s * 5) % 3);
    check_chain_float_double<SoftmaxCrossEntropy>(labels, n);
}

namespace {

using Mlp = Chain<Input<2>, Dense<16, Tanh>, Dense<1>>;

template <class Opt>
std::pair<double, std::vector<double>> fit_double(Opt opt, int threads) {
    const std::size_t n = 500;
    const auto x = test::random_vector(2 * n, 21);
    std::vector<double> y(n);
    for (std::size_t s = 0; s < n; ++s) y[s] = std::sin(x[2 * s]) * x[2 * s + 1];
    std::vector<double> p(Mlp::num_params), g(Mlp::num_params);
    init_params<Mlp>(p, 3);
    const double before = value_and_gradient<Mlp>(p, g, x, y, SquaredError{});
    FitOptions o;
    o.epochs = 20;
    o.batch = 50;
    o.seed = 4;
    o.threads = threads;
    fit<Mlp>(p, SquaredError{}, x, y, opt, o);
    return {value_and_gradient<Mlp>(p, g, x, y, SquaredError{}) / before, p};
}
}  // namespace

TEST_CASE("fit in double: every optimiser lowers the loss, same bits on 1 and 2 threads", "[float][double][fit]") {
    const auto [sgd, p_sgd] = fit_double(SGD<double>(0.05, 0.9), 1);
    const auto [adam, p_adam] = fit_double(Adam<double>(1e-2), 1);
    const auto [adamw, p_adamw] = fit_double(AdamW<double>(1e-2, 1e-2), 1);
    INFO("final / initial loss: SGD " << sgd << ", Adam " << adam << ", AdamW " << adamw);
    REQUIRE(sgd < 0.2);
    REQUIRE(adam < 0.2);
    REQUIRE(adamw < 0.2);
    REQUIRE(p_adam != p_adamw);  // the weight decay did something
    REQUIRE(fit_double(Adam<double>(1e-2), 2).second == p_adam);
}

TEST_CASE("fit in double on ByteData inputs", "[float][double][fit]") {
    using Net = Chain<Input<4>, Dense<8, Tanh>, Dense<2>>;
    const std::size_t n = 200;
    std::vector<std::uint8_t> bytes(4 * n);
    std::vector<std::int32_t> labels(n);
    Rng rng(2);
    for (std::size_t s = 0; s < n; ++s) {
        for (std::size_t f = 0; f < 4; ++f) bytes[4 * s + f] = static_cast<std::uint8_t>(rng.below(256));
        labels[s] = bytes[4 * s] + bytes[4 * s + 1] > 255 ? 1 : 0;  // a linearly separable rule
    }
    const ByteData x{bytes, 1 / 255.0, -0.5};
    std::vector<double> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, 1);
    const double before = value_and_gradient<Net>(p, g, x, labels, SoftmaxCrossEntropy{});
    Adam<double> opt(3e-2);
    FitOptions o;
    o.epochs = 40;
    o.batch = 32;
    fit<Net>(p, SoftmaxCrossEntropy{}, x, labels, opt, o);
    const double after = value_and_gradient<Net>(p, g, x, labels, SoftmaxCrossEntropy{});
    REQUIRE(after < 0.5 * before);
}

}  // namespace test_float_double_training
