// Dropout: the layer checker in training and in inference; the mask's rate, scale and independence
// from the chunking; identity in predict and the pullback API; other masks at other steps and in other
// Dropout layers of one chain; and a fit resumed from a checkpoint that draws what the uninterrupted
// fit drew (thread counts: tests/test_repro.cpp; allocation: tests/test_no_alloc.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/checkpoint.hpp"
#include "support.hpp"

namespace test_dropout {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
using Drop30 = Dropout<30>;
using DropThird = Dropout<1, 3>;

namespace {

LayerCheckOptions options(bool training) {
    LayerCheckOptions o;
    o.chunk_sizes = {1, 3, 17, 35};
    o.pass = Pass{.training = training, .seed = 4, .step = 9, .first_sample = 100};
    return o;
}

template <class B>
std::vector<double> multipliers(std::size_t n, const Pass& pass) {
    std::vector<double> x(B::in_size * n, 1.0), y(x.size()), saved(x.size());
    B::forward(static_cast<const double*>(nullptr), x.data(), y.data(), saved.data(), n, pass);
    REQUIRE(y == saved);  // y = m * 1
    return y;
}

using Net = Chain<Input<6>, Dense<32, Tanh>, Dropout<25>, Dense<32, Tanh>, Dropout<25>, Dense<2>>;

std::vector<double> train(std::size_t epochs, std::vector<double> p, Adam<double>& opt, bool reset, int threads = 1) {
    const std::size_t n = 200;
    const auto x = test::random_vector(6 * n, 21), y = test::random_vector(2 * n, 22);
    FitOptions o;
    o.epochs = epochs;
    o.batch = 64;
    o.shuffle = false;  // fit restarts its shuffling stream from the seed on every call
    o.seed = 17;
    o.threads = threads;
    o.reset_optimizer = reset;
    fit<Net>(p, SquaredError{}, x, y, opt, o);
    return p;
}

}  // namespace

TEMPLATE_TEST_CASE("Dropout: the layer checker in training and in inference", "[dropout][gradient]", Drop30, DropThird) {
    for (bool training : {true, false}) {
        INFO("training=" << training);
        const auto flat = check_layer<TestType, Input<9>>(options(training));
        INFO(flat.report());
        REQUIRE(flat.passed());
        const auto image = check_layer<TestType, Input<3, 4, 2>>(options(training));
        INFO(image.report());
        REQUIRE(image.passed());
    }
}

TEST_CASE("Dropout: drops the rate, scales the rest by 1 / (1 - rate), identity outside training", "[dropout]") {
    using B = Dropout<30>::bound<Shape<1000>>;
    const auto m = multipliers<B>(100, Pass{.training = true, .seed = 1, .step = 2});
    std::size_t dropped = 0;
    for (double v : m) {
        REQUIRE((v == 0.0 || v == 1.0 / 0.7));
        dropped += v == 0.0;
    }
    const double rate = static_cast<double>(dropped) / static_cast<double>(m.size());
    // 10^5 draws: the standard deviation of the rate is 0.0015, so 0.01 is over 6 of them.
    REQUIRE(std::abs(rate - 0.3) < 0.01);
    for (double v : multipliers<B>(7, Pass{})) REQUIRE(v == 1.0);
    STATIC_REQUIRE(Dropout<1, 3>::threshold == (std::uint64_t(1) << 53) / 3);
    STATIC_REQUIRE(Dropout<0>::threshold == 0);
}

TEST_CASE("Dropout: the mask depends on (seed, step, sample index, feature), not on the chunking", "[dropout]") {
    using B = Dropout<50>::bound<Shape<13>>;
    const Pass pass{.training = true, .seed = 3, .step = 5, .first_sample = 10};
    const auto whole = multipliers<B>(40, pass);
    // The same 40 samples as chunks of 7 and 33 (first_sample advanced as Workspace does).
    const auto a = multipliers<B>(7, pass);
    Pass later = pass;
    later.first_sample += 7;
    const auto b = multipliers<B>(33, later);
    for (std::size_t f = 0; f < 13; ++f) {
        for (std::size_t s = 0; s < 7; ++s) REQUIRE(whole[f * 40 + s] == a[f * 7 + s]);
        for (std::size_t s = 0; s < 33; ++s) REQUIRE(whole[f * 40 + 7 + s] == b[f * 33 + s]);
    }
    Pass other_step = pass, other_seed = pass, other_stream = pass;
    ++other_step.step;
    ++other_seed.seed;
    other_stream = substream(pass, 1);
    REQUIRE(multipliers<B>(40, other_step) != whole);
    REQUIRE(multipliers<B>(40, other_seed) != whole);
    REQUIRE(multipliers<B>(40, other_stream) != whole);
}

TEST_CASE("Dropout: two Dropout layers of one chain draw different masks", "[dropout]") {
    using Twice = Chain<Input<64>, Dropout<50>, Dropout<50>>;
    const std::size_t n = 4;
    std::vector<double> x(64 * n, 1.0), y(64 * n), saved(Twice::saved_per_sample * n);
    Twice::forward(static_cast<const double*>(nullptr), x.data(), y.data(), saved.data(), n,
                   Pass{.training = true, .seed = 1, .step = 1});
    const double* m0 = saved.data() + Twice::saved_offset[0] * n;
    const double* m1 = saved.data() + Twice::saved_offset[1] * n;
    REQUIRE(!std::equal(m0, m0 + 64 * n, m1));
}

TEST_CASE("Dropout: predict and the pullback API are deterministic and ignore it", "[dropout]") {
    using WithDrop = Chain<Input<5>, Dense<16, Tanh>, Dropout<40>, Dense<3>>;
    using Without = Chain<Input<5>, Dense<16, Tanh>, Dense<3>>;
    std::vector<double> p(WithDrop::num_params);
    init_params<WithDrop>(p, 2);
    const auto x = test::random_vector(5 * 30, 3);
    std::vector<double> a(90), b(90), c(90);
    predict<WithDrop>(p, x, a);
    predict<WithDrop>(p, x, b);
    predict<Without>(p, x, c);
    REQUIRE(a == b);
    REQUIRE(a == c);
    std::vector<double> J1(3 * 5), J2(3 * 5);
    PullbackWorkspace<WithDrop, double> w1(1);
    PullbackWorkspace<Without, double> w2(1);
    jacobian(w1, p, std::span(x).first(5), J1);
    jacobian(w2, p, std::span(x).first(5), J2);
    REQUIRE(J1 == J2);
    // Training does drop: the gradients differ from the chain without Dropout.
    const auto t = test::random_vector(3 * 30, 4);
    std::vector<double> g1(p.size()), g2(p.size());
    value_and_gradient<WithDrop>(p, g1, x, t, SquaredError{});
    value_and_gradient<Without>(p, g2, x, t, SquaredError{});
    REQUIRE(g1 != g2);
}

TEST_CASE("Dropout: a fit resumed from a checkpoint gives the bits of the uninterrupted fit", "[dropout][checkpoint]") {
    std::vector<double> p0(Net::num_params);
    init_params<Net>(p0, 1);
    Adam<double> straight_opt(1e-2);
    const auto straight = train(2, p0, straight_opt, true);

    Adam<double> first_opt(1e-2);
    const auto half = train(1, p0, first_opt, true);
    const auto bytes = checkpoint_bytes<Net>(half, first_opt);
    std::vector<double> p(Net::num_params);
    Adam<double> resumed_opt(1e-2);
    load_checkpoint_bytes<Net>(bytes, "memory", p, resumed_opt);
    REQUIRE(resumed_opt.steps() == 4);  // 200 samples in batches of 64
    const auto resumed = train(1, p, resumed_opt, false);
    REQUIRE(resumed == straight);

    // The test could fail: had the resumed fit restarted the step numbering (an optimiser state with the
    // same moments but step 0 would give other Adam bias corrections too, so compare masks instead),
    // the second epoch would draw the first epoch's masks, which differ from its own.
    using B = Dropout<25>::bound<Shape<32>>;
    REQUIRE(multipliers<B>(64, Pass{.training = true, .seed = 17, .step = 0}) !=
            multipliers<B>(64, Pass{.training = true, .seed = 17, .step = 4}));
}

TEST_CASE("Dropout: with an optimiser that keeps no step count, FitOptions::first_step continues the numbering", "[dropout]") {
    const std::size_t n = 100;
    const auto x = test::random_vector(6 * n, 31), y = test::random_vector(2 * n, 32);
    std::vector<double> p0(Net::num_params);
    init_params<Net>(p0, 2);
    auto run = [&](std::vector<double> p, std::size_t epochs, std::uint64_t first_step) {
        SGD<double> opt(1e-2);
        FitOptions o;
        o.epochs = epochs;
        o.batch = 32;
        o.shuffle = false;
        o.seed = 5;
        o.first_step = first_step;
        fit<Net>(p, SquaredError{}, x, y, opt, o);
        return p;
    };
    const auto straight = run(p0, 2, 0);
    const auto half = run(p0, 1, 0);
    REQUIRE(run(half, 1, 4) == straight);
    REQUIRE(run(half, 1, 0) != straight);  // restarting at step 0 repeats the first epoch's masks
}

}  // namespace test_dropout
