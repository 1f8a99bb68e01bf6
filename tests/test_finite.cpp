// Non-finite values: the opt-in data check names the first bad sample, and training that diverges stops
// with an error naming the epoch and step, leaving the parameters of the last finite step.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_finite {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
using Net = Chain<Input<3>, Dense<8, Tanh>, Dense<2>>;
using Linear = Chain<Input<3>, Dense<1>>;

namespace {
constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();
constexpr float inf_f = std::numeric_limits<float>::infinity();

// Where training stopped, as seen by on_step: the last completed step and the parameters after it.
struct LastStep {
    std::size_t epoch = 0, step = 0, steps_per_epoch = 0;
    std::vector<float> params;
};

// The (epoch, step) that follows `last`, as fit's error message names it.
std::string next_step(const LastStep& last) {
    if (last.epoch == 0) return "epoch 1, step 1";
    if (last.step == last.steps_per_epoch) return "epoch " + std::to_string(last.epoch + 1) + ", step 1";
    return "epoch " + std::to_string(last.epoch) + ", step " + std::to_string(last.step + 1);
}

template <class N, class Y, class L, class Opt>
std::string fit_until_error(std::vector<float>& p, const L& loss, const std::vector<float>& x, const Y& y, Opt& opt,
                            FitOptions o, LastStep& last) {
    o.on_step = [&](const StepInfo& s) {
        last = {s.epoch, s.step, s.steps_per_epoch, p};
    };
    try {
        fit<N>(p, loss, x, y, opt, o);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("check_finite names the first bad sample and value", "[finite]") {
    auto x = test::random_vector<float>(3 * 10, 1);
    REQUIRE_NOTHROW(check_finite(x, 3));
    x[3 * 7 + 2] = inf_f;
    x[3 * 8 + 0] = nan_f;
    REQUIRE_THROWS_AS(check_finite(x, 3), std::invalid_argument);
    REQUIRE_THROWS_WITH(check_finite(x, 3), "check_finite: input sample 7, value 2 of 3, is +Inf");
    x[3 * 2 + 1] = nan_f;
    REQUIRE_THROWS_WITH(check_finite(x, 3, "target"), "check_finite: target sample 2, value 1 of 3, is NaN");
    std::vector<double> d = {1.0, -std::numeric_limits<double>::infinity()};
    REQUIRE_THROWS_WITH(check_finite(d, 1), Catch::Contains("sample 1, value 0 of 1, is -Inf"));
    const std::vector<std::int32_t> labels = {0, 1, 2};
    REQUIRE_NOTHROW(check_finite(labels, 1));
    const std::vector<std::uint8_t> bytes(6, 7);
    REQUIRE_NOTHROW(check_finite(ByteData{bytes, 1.0 / 255, 0.0}, 3));
    REQUIRE_THROWS_WITH(check_finite(ByteData{bytes, nan_f, 0.0}, 3), Catch::Contains("ByteData scale nan"));
    REQUIRE_THROWS_WITH(check_finite(x, 0), Catch::Contains("row size is 0"));
}

TEST_CASE("FitOptions::check_finite rejects bad inputs or targets before the first step", "[finite][fit]") {
    const std::size_t n = 100;
    auto x = test::random_vector<float>(3 * n, 1), y = test::random_vector<float>(2 * n, 2);
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 1);
    const auto p0 = p;
    Adam opt(1e-2f);
    FitOptions o;
    o.batch = 16;
    o.check_finite = true;
    std::size_t steps = 0;
    o.on_step = [&](const StepInfo&) { ++steps; };
    y[2 * 60 + 1] = nan_f;
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, x, y, opt, o), "check_finite: target sample 60, value 1 of 2, is NaN");
    x[3 * 41] = -inf_f;
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, x, y, opt, o), "check_finite: input sample 41, value 0 of 3, is -Inf");
    REQUIRE(steps == 0);
    REQUIRE(p == p0);
    // Without the check the same data reach training, which stops at the first batch holding sample 41.
    o.check_finite = false;
    o.shuffle = false;
    // (-Inf through tanh gives a finite loss but an infinite weight gradient.)
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, x, y, opt, o), Catch::Contains("gradient became non-finite at epoch 1, step 3"));
    REQUIRE(steps == 2);
}

TEST_CASE("fit: a NaN target stops training at its batch, and p equals the parameters after the step before", "[finite][fit]") {
    const std::size_t n = 256;
    const auto x = test::random_vector<float>(3 * n, 1);
    auto y = test::random_vector<float>(2 * n, 2);
    y[2 * 200] = nan_f;  // batch 4 of 64 (no shuffling)
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 3);
    Adam opt(1e-2f);
    FitOptions o;
    o.epochs = 3;
    o.batch = 64;
    o.shuffle = false;
    LastStep last;
    const std::string error = fit_until_error<Net>(p, SquaredError{}, x, y, opt, o, last);
    REQUIRE_THAT(error, Catch::Contains("loss became non-finite at epoch 1, step 4"));
    REQUIRE(last.step == 3);
    REQUIRE(p == last.params);
    // And those are the parameters of a clean run of exactly 3 steps on the same batches.
    std::vector<float> q(Net::num_params);
    init_params<Net>(q, 3);
    Adam opt2(1e-2f);
    FitOptions o3 = o;
    o3.epochs = 1;
    const std::vector<float> x3(x.begin(), x.begin() + 3 * 192), y3(y.begin(), y.begin() + 2 * 192);
    fit<Net>(q, SquaredError{}, x3, y3, opt2, o3);
    REQUIRE(p == q);
}

TEST_CASE("fit: divergence from a too large learning rate stops at the first non-finite loss, in a later epoch", "[finite][fit]") {
    // Plain gradient descent on least squares with a step far beyond 2 / (largest curvature): the
    // error grows geometrically until the loss overflows float.
    const std::size_t n = 256;
    const auto x = test::random_vector<float>(3 * n, 1), y = test::random_vector<float>(n, 2);
    std::vector<float> p(Linear::num_params);
    init_params<Linear>(p, 1);
    SGD opt(5.0f);
    FitOptions o;
    o.epochs = 1000;
    o.batch = 64;
    o.seed = 4;
    LastStep last;
    const std::string error = fit_until_error<Linear>(p, SquaredError{}, x, y, opt, o, last);
    INFO(error);
    REQUIRE_THAT(error, Catch::Contains("became non-finite at " + next_step(last)));
    REQUIRE(last.epoch >= 2);  // several finite steps first, so the comparison below means something
    REQUIRE(p == last.params);
    for (float v : p) REQUIRE(std::isfinite(v));
}

TEST_CASE("fit: an update that overflows (finite gradient, huge step) is undone", "[finite][fit]") {
    const std::size_t n = 64;
    const auto x = test::random_vector<float>(3 * n, 1);
    std::vector<float> y(n, 1e3f);  // large errors: gradients of order 1e3
    std::vector<float> p(Linear::num_params);
    init_params<Linear>(p, 1);
    const auto p0 = p;
    SGD opt(3e37f);  // lr * gradient > FLT_MAX
    LastStep last;
    const std::string error = fit_until_error<Linear>(p, SquaredError{}, x, y, opt, FitOptions{}, last);
    REQUIRE(error == "fit: the parameter update became non-finite at epoch 1, step 1; the parameters are those before this step");
    REQUIRE(last.epoch == 0);
    REQUIRE(p == p0);
}

}  // namespace test_finite
