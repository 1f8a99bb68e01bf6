// fit: learns a simple function, reproduces bit for bit from the seed (and across thread counts),
// reports progress through its callbacks, and stops on a non-finite loss without corrupting p.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_fit {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
using Net = Chain<Input<2>, Dense<16, Tanh>, Dense<1>>;

namespace {
struct Data {
    std::vector<float> x, y;
};
Data make_data(std::size_t n) {
    Data d{test::random_vector<float>(2 * n, 1), std::vector<float>(n)};
    for (std::size_t s = 0; s < n; ++s) d.y[s] = std::sin(d.x[2 * s]) * d.x[2 * s + 1];
    return d;
}
std::vector<float> train(const Data& d, int threads, std::size_t* epochs_seen = nullptr, std::size_t* steps_seen = nullptr) {
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 3);
    Adam opt(1e-2f);
    FitOptions o;
    o.epochs = 30;
    o.batch = 64;
    o.seed = 11;
    o.threads = threads;
    if (epochs_seen) o.on_epoch = [&](const EpochInfo&) { ++*epochs_seen; };
    if (steps_seen) o.on_step = [&](const StepInfo&) { ++*steps_seen; };
    fit<Net>(p, SquaredError{}, d.x, d.y, opt, o);
    return p;
}
}  // namespace

TEST_CASE("fit: learns sin(x0) * x1 and calls back once per epoch and step", "[fit]") {
    const auto d = make_data(1000);
    std::vector<float> p0(Net::num_params), g(Net::num_params);
    init_params<Net>(p0, 3);
    const float before = value_and_gradient<Net>(p0, g, d.x, d.y, SquaredError{});
    std::size_t epochs = 0, steps = 0;
    const auto p = train(d, 1, &epochs, &steps);
    const float after = value_and_gradient<Net>(p, g, d.x, d.y, SquaredError{});
    REQUIRE(after < 0.05f * before);
    REQUIRE(epochs == 30);
    REQUIRE(steps == 30 * 16);  // 1000 samples in batches of 64: 15 full + 1 partial
}

TEST_CASE("fit: the same seed gives the same bits, on 1 or 2 threads", "[fit][parallel]") {
    const auto d = make_data(3000);
    const auto a = train(d, 1), b = train(d, 1), c = train(d, 2);
    REQUIRE(a == b);
    REQUIRE(a == c);
}

TEST_CASE("fit: a non-finite loss stops training and names the step, p is left finite", "[fit][errors]") {
    auto d = make_data(256);
    d.x[2 * 200] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 3);
    Adam opt(1e-2f);
    FitOptions o;
    o.epochs = 2;
    o.batch = 64;
    o.shuffle = false;
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, d.x, d.y, opt, o), Catch::Contains("epoch 1, step 4"));
    for (float v : p) REQUIRE(std::isfinite(v));
    REQUIRE(opt.steps() == 3);
}

}  // namespace test_fit
