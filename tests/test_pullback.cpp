// The caller's pullbacks (chainlet/pullback.hpp): vector-Jacobian products and input Jacobians against
// finite differences in double, accumulation into g, size errors, no allocation after set-up, and
// concurrent use of one parameter vector from several threads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "alloc_counter.hpp"
#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_pullback {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

namespace {

using DenseNet = Chain<Input<3>, Dense<8, Tanh>, Dense<6, GELU>, Dense<4, Sigmoid>, Dense<2>>;
using ConvNet = Chain<Input<6, 5, 2>, Conv<3, 3, 3, Tanh, Padding::same>, MaxPool<2>, Flatten, Dense<4, Softplus>, Dense<3>>;

// Checks dx and g of vjp against central differences of f = sum(w .* net(p, x)) for n samples.
template <class Net>
void check_vjp(std::size_t n, std::uint64_t seed) {
    auto p = test::random_vector(Net::num_params, seed, 0.5);
    const auto x = test::random_vector(Net::in_size * n, seed + 1);
    const auto w = test::random_vector(Net::out_size * n, seed + 2);
    PullbackWorkspace<Net, double> ws(n);
    PullbackWorkspace<Net, double> probe(n);
    auto f = [&](const std::vector<double>& pp, const std::vector<double>& xx) {
        std::vector<double> y(Net::out_size * n);
        forward(probe, pp, xx, y);
        double s = 0;
        for (std::size_t i = 0; i < y.size(); ++i) s += w[i] * y[i];
        return s;
    };
    std::vector<double> dx(Net::in_size * n), g(Net::num_params, 0.0);
    vjp(ws, p, x, w, dx, g);
    INFO("n=" << n);
    CHECK(test::gradient_error([&](const std::vector<double>& pp) { return f(pp, x); }, p, g) < 1e-6);
    CHECK(test::gradient_error([&](const std::vector<double>& xx) { return f(p, xx); }, x, dx) < 1e-6);
}

// Largest |J - J_fd| relative to max(|J_fd|, 1e-3 max|J_fd|, 1e-3), J_fd by central differences.
template <class Net>
double jacobian_error(std::uint64_t seed) {
    const auto p = test::random_vector(Net::num_params, seed, 0.5);
    const auto x = test::random_vector(Net::in_size, seed + 1);
    PullbackWorkspace<Net, double> ws(1);
    std::vector<double> J(Net::out_size * Net::in_size);
    jacobian(ws, p, x, J);
    double worst = 0;
    for (std::size_t i = 0; i < Net::out_size; ++i) {
        std::vector<double> row(J.begin() + static_cast<std::ptrdiff_t>(i * Net::in_size),
                                J.begin() + static_cast<std::ptrdiff_t>((i + 1) * Net::in_size));
        auto yi = [&](const std::vector<double>& xx) {
            std::vector<double> y(Net::out_size);
            forward(ws, p, xx, y);
            return y[i];
        };
        worst = test::worse(worst, test::gradient_error(yi, x, row));
    }
    return worst;
}

}  // namespace

TEST_CASE("vjp matches finite differences in double: dense chain, 1, 3 and 40 samples", "[pullback]") {
    for (std::size_t n : {1u, 3u, 40u}) check_vjp<DenseNet>(n, 10 + n);
}

TEST_CASE("vjp matches finite differences in double: conv chain", "[pullback]") {
    for (std::size_t n : {1u, 5u}) check_vjp<ConvNet>(n, 20 + n);
}

TEST_CASE("input Jacobians match finite differences to 1e-6 relative in double", "[pullback]") {
    CHECK(jacobian_error<DenseNet>(31) < 1e-6);
    CHECK(jacobian_error<ConvNet>(32) < 1e-6);
}

TEST_CASE("the Jacobian agrees with vjp: w^T J == dx of vjp(w)", "[pullback]") {
    const auto p = test::random_vector(DenseNet::num_params, 41, 0.5);
    const auto x = test::random_vector(DenseNet::in_size, 42);
    const auto w = test::random_vector(DenseNet::out_size, 43);
    PullbackWorkspace<DenseNet, double> ws(1);
    std::vector<double> J(DenseNet::out_size * DenseNet::in_size), dx(DenseNet::in_size), g(DenseNet::num_params);
    jacobian(ws, p, x, J);
    vjp(ws, p, x, w, dx, g);
    std::vector<double> wJ(DenseNet::in_size, 0.0);
    for (std::size_t i = 0; i < DenseNet::out_size; ++i)
        for (std::size_t j = 0; j < DenseNet::in_size; ++j) wJ[j] += w[i] * J[i * DenseNet::in_size + j];
    CHECK(test::max_rel_diff(wJ, dx) < 1e-12);
}

TEST_CASE("pullback accumulates into g, overwrites dx, and can be repeated on one forward", "[pullback]") {
    const std::size_t n = 7;
    const auto p = test::random_vector(DenseNet::num_params, 51, 0.5);
    const auto x = test::random_vector(DenseNet::in_size * n, 52);
    const auto dy = test::random_vector(DenseNet::out_size * n, 53);
    PullbackWorkspace<DenseNet, double> ws(n);
    std::vector<double> y(DenseNet::out_size * n);
    forward(ws, p, x, y);

    std::vector<double> dx_once(DenseNet::in_size * n, 0.0), g_once(DenseNet::num_params, 0.0);
    pullback(ws, p, dy, dx_once, g_once);

    // from a nonzero g and a dx full of garbage: g = g0 + g_once, dx = dx_once
    const auto g0 = test::random_vector(DenseNet::num_params, 54);
    std::vector<double> g = g0, dx(DenseNet::in_size * n, 1e30);
    pullback(ws, p, dy, dx, g);
    CHECK(dx == dx_once);
    std::vector<double> expected(g0.size());
    for (std::size_t j = 0; j < g0.size(); ++j) expected[j] = g0[j] + g_once[j];
    CHECK(test::max_rel_diff(g, expected) < 1e-12);

    // twice more: g = g0 + 3 g_once
    pullback(ws, p, dy, dx, g);
    pullback(ws, p, dy, dx, g);
    for (std::size_t j = 0; j < g0.size(); ++j) expected[j] = g0[j] + 3 * g_once[j];
    CHECK(test::max_rel_diff(g, expected) < 1e-12);
    CHECK(dx == dx_once);

    // linear in dy: pulling back 2 dy gives 2 dx (exactly: scaling by 2 is exact in binary)
    std::vector<double> dy2 = dy, dx2(dx.size()), g2(g.size(), 0.0);
    for (auto& v : dy2) v *= 2;
    pullback(ws, p, dy2, dx2, g2);
    for (std::size_t i = 0; i < dx.size(); ++i) CHECK(dx2[i] == 2 * dx_once[i]);
}

TEST_CASE("pullback needs a recorded forward, and jacobian clears it", "[pullback]") {
    const auto p = test::random_vector(DenseNet::num_params, 61, 0.5);
    const auto x = test::random_vector(DenseNet::in_size, 62);
    PullbackWorkspace<DenseNet, double> ws(4);
    std::vector<double> y(DenseNet::out_size), dy(DenseNet::out_size, 1.0), dx(DenseNet::in_size),
        g(DenseNet::num_params), J(DenseNet::out_size * DenseNet::in_size);
    CHECK(ws.recorded() == 0);
    REQUIRE_THROWS_AS(pullback(ws, p, dy, dx, g), std::runtime_error);
    forward(ws, p, x, y);
    CHECK(ws.recorded() == 1);
    REQUIRE_NOTHROW(pullback(ws, p, dy, dx, g));
    jacobian(ws, p, x, J);
    CHECK(ws.recorded() == 0);
    REQUIRE_THROWS_WITH(pullback(ws, p, dy, dx, g), Catch::Contains("call forward"));
}

TEST_CASE("pullback API: wrong sizes are clear errors", "[pullback]") {
    using Catch::Contains;
    using V = std::vector<double>;
    constexpr std::size_t P = DenseNet::num_params, I = DenseNet::in_size, O = DenseNet::out_size;
    const V p(P, 0.1), x(2 * I, 0.2);
    PullbackWorkspace<DenseNet, double> ws(2);
    V y(2 * O), dy(2 * O), dx(2 * I), g(P), J(O * I);
    REQUIRE_THROWS_WITH(forward(ws, V(P + 1), x, y), Contains("forward: the parameter buffer has " + std::to_string(P + 1) + " elements, expected " + std::to_string(P)));
    REQUIRE_THROWS_WITH(forward(ws, p, V(2 * I + 1), y), Contains("expected a positive multiple of 3"));
    REQUIRE_THROWS_WITH(forward(ws, p, V(3 * I), V(3 * O)), Contains("3 samples, the workspace was sized for at most 2"));
    REQUIRE_THROWS_WITH(forward(ws, p, x, V(O)), Contains("the output buffer has 2 elements, expected 4"));
    forward(ws, p, x, y);
    REQUIRE_THROWS_WITH(pullback(ws, p, V(O), dx, g), Contains("the output cotangent dy"));
    REQUIRE_THROWS_WITH(pullback(ws, p, dy, V(I), g), Contains("the input cotangent dx has 3 elements, expected 6"));
    REQUIRE_THROWS_WITH(pullback(ws, p, dy, dx, V(P - 1)), Contains("the parameter cotangent g has " + std::to_string(P - 1) + " elements, expected " + std::to_string(P)));
    REQUIRE_THROWS_AS(vjp(ws, p, x, V(O), dx, g), std::invalid_argument);
    REQUIRE_THROWS_AS(vjp(ws, p, x, dy, dx, V()), std::invalid_argument);
    REQUIRE_THROWS_WITH(jacobian(ws, p, x, J), Contains("the input (one sample) has 6 elements, expected 3"));
    REQUIRE_THROWS_WITH(jacobian(ws, p, V(I), V(O * I - 1)), Contains("Jacobian buffer"));
}

TEST_CASE("forward, pullback, vjp and jacobian allocate nothing after set-up (float and double)", "[pullback][alloc]") {
    auto run = [](auto zero) {
        using T = decltype(zero);
        const std::size_t n = 20;
        std::vector<T> p(DenseNet::num_params), x(DenseNet::in_size * n, T(0.3)), y(DenseNet::out_size * n),
            dy(DenseNet::out_size * n, T(1)), dx(DenseNet::in_size * n), g(DenseNet::num_params),
            J(DenseNet::out_size * DenseNet::in_size);
        init_params<DenseNet>(p, 1);
        PullbackWorkspace<DenseNet, T> ws(n);
        const long before = test::allocations.load();
        for (int k = 0; k < 5; ++k) {
            forward(ws, p, x, y);
            pullback(ws, p, dy, dx, g);
            vjp(ws, p, x, dy, dx, g);
            jacobian(ws, p, std::span<const T>(x).first(DenseNet::in_size), J);
        }
        return test::allocations.load() - before;
    };
    const long in_double = run(0.0);
    const long in_float = run(0.0f);
    CHECK(in_double == 0);
    CHECK(in_float == 0);
}

TEST_CASE("threads sharing the parameters, each with its own workspace, match serial results bit for bit", "[pullback]") {
    constexpr std::size_t threads = 4, n = 9, rounds = 50;
    constexpr std::size_t I = ConvNet::in_size, O = ConvNet::out_size, P = ConvNet::num_params;
    const auto p = test::random_vector(P, 71, 0.5);
    struct Result {
        std::vector<double> y, dx, g, J;
    };
    auto work = [&](std::size_t t, Result& r) {
        const auto x = test::random_vector(I * n, 100 + t);
        const auto dy = test::random_vector(O * n, 200 + t);
        PullbackWorkspace<ConvNet, double> ws(n);
        r.y.assign(O * n, 0.0);
        r.dx.assign(I * n, 0.0);
        r.g.assign(P, 0.0);
        r.J.assign(O * I, 0.0);
        for (std::size_t k = 0; k < rounds; ++k) {
            forward(ws, p, x, r.y);
            pullback(ws, p, dy, r.dx, r.g);  // g sums all rounds
            jacobian(ws, p, std::span<const double>(x).first(I), r.J);
        }
    };
    std::vector<Result> serial(threads), concurrent(threads);
    for (std::size_t t = 0; t < threads; ++t) work(t, serial[t]);
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(work, t, std::ref(concurrent[t]));
    for (auto& th : pool) th.join();
    for (std::size_t t = 0; t < threads; ++t) {
        INFO("thread " << t);
        CHECK(concurrent[t].y == serial[t].y);
        CHECK(concurrent[t].dx == serial[t].dx);
        CHECK(concurrent[t].g == serial[t].g);
        CHECK(concurrent[t].J == serial[t].J);
    }
    CHECK(serial[0].g != serial[1].g);  // the threads did different work
}

}  // namespace test_pullback
