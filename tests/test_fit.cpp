// fit: learns a simple function, reproduces bit for bit from the seed (and across thread counts),
// reports progress through its callbacks, and stops on a non-finite loss without corrupting p.
#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
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
Data make_data(std::size_t n, std::uint64_t seed = 1) {
    Data d{test::random_vector<float>(2 * n, seed), std::vector<float>(n)};
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

// ---- schedules, clipping, penalties, validation and stopping (FitOptions) ----

TEST_CASE("schedules: the factors of StepDecay, ExponentialDecay, CosineWarmup and ReduceOnPlateau", "[fit][schedule]") {
    auto at = [](std::size_t step, std::size_t epoch, double metric = std::nan("")) {
        return ScheduleInput{step, epoch, 100, 10, metric, false};
    };
    REQUIRE(StepDecay{3, 0.5}(at(0, 1)) == 1.0);
    REQUIRE(StepDecay{3, 0.5}(at(0, 3)) == 1.0);
    REQUIRE(StepDecay{3, 0.5}(at(0, 4)) == 0.5);
    REQUIRE(StepDecay{3, 0.5}(at(0, 7)) == 0.25);
    REQUIRE(ExponentialDecay{0.9}(at(0, 1)) == 1.0);
    REQUIRE(ExponentialDecay{0.9}(at(0, 3)) == Approx(0.81).epsilon(1e-15));
    const CosineWarmup cw{4, 14, 0.1};
    REQUIRE(cw(at(0, 1)) == 0.25);
    REQUIRE(cw(at(3, 1)) == 1.0);
    REQUIRE(cw(at(4, 1)) == 1.0);
    REQUIRE(cw(at(9, 1)) == Approx(0.55).epsilon(1e-14));  // half way: min + (1 - min) / 2
    REQUIRE(cw(at(14, 2)) == 0.1);
    REQUIRE(cw(at(500, 2)) == 0.1);
    REQUIRE_THROWS_WITH(CosineWarmup({4, 4})(at(0, 1)), Catch::Contains("total > warmup"));
    REQUIRE_THROWS_WITH(StepDecay({0, 0.5})(at(0, 1)), Catch::Contains("every >= 1"));

    // patience 1: a metric that stops improving halves the factor after two epochs without a gain
    ReduceOnPlateau plateau(0.5, 1);
    const double metrics[] = {std::nan(""), 4, 3, 3, 3, 2.9, 2.9, 2.9, 2.9, 2.9};
    std::vector<double> factors;
    for (std::size_t e = 1; e <= 10; ++e)
        for (std::size_t s = 0; s < 3; ++s) {  // several steps per epoch: each epoch's metric is read once
            const double f = plateau(at(e * 3 + s, e, metrics[e - 1]));
            if (s == 2) factors.push_back(f);
        }
    REQUIRE(factors == std::vector<double>{1, 1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.125});
}

TEST_CASE("fit: a schedule sets each step's learning rate, and fit restores the starting rate", "[fit][schedule]") {
    const auto d = make_data(256);
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 3);
    Adam opt(1e-2f);
    FitOptions o;
    o.epochs = 3;
    o.batch = 64;
    o.schedule = CosineWarmup{3, 12};
    std::vector<double> rates;
    o.on_step = [&](const StepInfo& s) { rates.push_back(s.learning_rate); };
    fit<Net>(p, SquaredError{}, d.x, d.y, opt, o);
    REQUIRE(rates.size() == 12);
    for (std::size_t s = 0; s < 12; ++s)
        REQUIRE(rates[s] == static_cast<double>(static_cast<float>(1e-2f * CosineWarmup{3, 12}(
                                ScheduleInput{s, 1, 3, 4, 0, false}))));
    REQUIRE(opt.learning_rate() == 1e-2f);

    // an optimiser of the user's without a learning rate cannot take a schedule
    struct NoRate {
        void init(std::size_t) {}
        void step(std::span<float> q, std::span<const float> g) {
            for (std::size_t i = 0; i < q.size(); ++i) q[i] -= 0.01f * g[i];
        }
    } no_rate;
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, d.x, d.y, no_rate, o), Catch::Contains("a schedule needs an optimiser"));
    // a schedule that gives a negative factor is an error, and the rate is restored after it
    o.schedule = [](const ScheduleInput& at) { return at.step < 2 ? 1.0 : -1.0; };
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, d.x, d.y, opt, o), Catch::Contains("factor -1 at step 2"));
    REQUIRE(opt.learning_rate() == 1e-2f);
}

TEMPLATE_TEST_CASE("fit: penalties and clipping give SGD's step on the penalised, clipped gradient", "[fit][clip]",
                   float, double) {
    using T = TestType;
    const std::size_t n = 64;
    const auto x = test::random_vector<T>(2 * n, 5), y = test::random_vector<T>(n, 6);
    std::vector<T> p0(Net::num_params);
    init_params<Net>(p0, 4);
    const Penalty pen = penalty_on_layer<Net>(0, 1e-2, 3e-2);
    REQUIRE(pen.first == 0);
    REQUIRE(pen.count == 2 * 16 + 16);
    for (const double clip : {0.0, 0.05}) {
        // what fit should do, by hand: mean gradient, + l1 sign(w) + 2 l2 w on layer 0, scaled to norm clip
        std::vector<T> g(Net::num_params);
        const T l = value_and_gradient<Net>(p0, g, x, y, SquaredError{});
        double penalty = 0;
        for (std::size_t i = pen.first; i < pen.first + pen.count; ++i) {
            const T w = p0[i];
            penalty += 1e-2 * std::abs(static_cast<double>(w)) + 3e-2 * static_cast<double>(w) * static_cast<double>(w);
            g[i] += T(1e-2) * static_cast<T>((w > 0) - (w < 0)) + T(2 * 3e-2) * w;
        }
        double sum = 0;
        for (T v : g) sum += static_cast<double>(v) * static_cast<double>(v);
        const double norm = std::sqrt(sum);
        if (clip > 0) {
            REQUIRE(norm > clip);  // the case clips
            for (T& v : g) v *= static_cast<T>(clip / norm);
        }
        std::vector<T> expected = p0;
        for (std::size_t i = 0; i < expected.size(); ++i) expected[i] -= T(0.1) * g[i];

        std::vector<T> p = p0;
        SGD<T> opt(T(0.1));
        FitOptions o;
        o.threads = 1;
        o.clip_norm = clip;
        o.penalties = {pen};
        StepInfo seen{};
        o.on_step = [&](const StepInfo& s) { seen = s; };
        fit<Net>(p, SquaredError{}, x, y, opt, o);
        REQUIRE(p == expected);
        REQUIRE(seen.loss == static_cast<double>(l));
        REQUIRE(seen.penalty == Approx(penalty).epsilon(1e-12));
        REQUIRE(seen.gradient_norm == Approx(norm).epsilon(1e-12));
    }
    std::vector<T> p = p0;
    SGD<T> opt(T(0.1));
    FitOptions o;
    o.penalties = {Penalty{Net::num_params - 2, 3, 0.1, 0}};
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, x, y, opt, o), Catch::Contains("a penalty on parameters"));
    o.penalties = {Penalty{0, 3, -0.1, 0}};
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, x, y, opt, o), Catch::Contains("must be finite and >= 0"));
    o.penalties.clear();
    o.clip_norm = -1;
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, x, y, opt, o), Catch::Contains("clip_norm is -1"));
    REQUIRE_THROWS_WITH(penalty_on_layer<Net>(2, 0, 1), Catch::Contains("layer 2 of a chain of 2 layers"));
}

TEST_CASE("fit: patience stops at the stalled metric and restores the best epoch's parameters", "[fit][validation]") {
    const auto d = make_data(256);
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 3);
    Adam opt(1e-2f);
    // a scripted metric: best at epoch 3, then no gain of more than min_delta 0.05
    const double script[] = {5, 4, 3, 2.96, 3.5, 2.99, 1, 1};
    std::size_t calls = 0;
    FitOptions o;
    o.epochs = 8;
    o.batch = 64;
    o.validation = Validation{.evaluate = [&] { return script[calls++]; }, .params = p.data()};
    o.patience = 3;
    o.min_delta = 0.05;
    std::vector<float> at_epoch3;
    std::vector<bool> best;
    o.on_epoch = [&](const EpochInfo& e) {
        if (e.epoch == 3) at_epoch3 = p;
        REQUIRE(e.validation == script[e.epoch - 1]);
        best.push_back(e.best);
    };
    const FitResult r = fit<Net>(p, SquaredError{}, d.x, d.y, opt, o);
    REQUIRE(r.epochs == 6);
    REQUIRE(r.stopped_early);
    REQUIRE(r.best_epoch == 3);
    REQUIRE(r.best_validation == 3);
    REQUIRE(best == std::vector<bool>{true, true, true, false, false, false});
    REQUIRE(p == at_epoch3);
    REQUIRE(opt.steps() == 6 * 4);

    // without restore_best p is the last epoch's; stop_when ends training after epoch 2
    calls = 0;
    o.restore_best = false;
    o.patience = 0;
    o.stop_when = [](const EpochInfo& e) { return e.epoch == 2; };
    std::vector<float> at_epoch2;
    o.on_epoch = [&](const EpochInfo& e) {
        if (e.epoch == 2) at_epoch2 = p;
    };
    const FitResult r2 = fit<Net>(p, SquaredError{}, d.x, d.y, opt, o);
    REQUIRE(r2.epochs == 2);
    REQUIRE(r2.stopped_early);
    REQUIRE(p == at_epoch2);

    std::vector<float> other(Net::num_params);
    o.validation->params = other.data();
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, d.x, d.y, opt, o), Catch::Contains("another parameter buffer"));
    o.validation.reset();
    o.patience = 2;
    REQUIRE_THROWS_WITH(fit<Net>(p, SquaredError{}, d.x, d.y, opt, o), Catch::Contains("patience 2 needs a validation set"));
}

TEMPLATE_TEST_CASE("validation_set: the mean loss and the accuracy at the parameters fit holds", "[fit][validation]",
                   float, double) {
    using T = TestType;
    using Classifier = Chain<Input<2>, Dense<8, Tanh>, Dense<3>>;
    const std::size_t n = 37;
    const auto x = test::random_vector<T>(2 * n, 7);
    std::vector<std::int32_t> labels(n);
    for (std::size_t s = 0; s < n; ++s) labels[s] = static_cast<std::int32_t>(s % 3);
    std::vector<T> p(Classifier::num_params);
    init_params<Classifier>(p, 2);
    const Validation acc = validation_set<Classifier>(p, x, labels, Accuracy{});
    const Validation ce = validation_set<Classifier>(p, x, labels, SoftmaxCrossEntropy{});
    REQUIRE(acc.higher_is_better);
    REQUIRE_FALSE(ce.higher_is_better);
    for (int round = 0; round < 2; ++round) {  // the metric reads p's current values
        std::vector<T> out(n * 3), g(Classifier::num_params);
        predict<Classifier>(p, x, out);
        std::size_t correct = 0;
        for (std::size_t s = 0; s < n; ++s)
            correct += static_cast<std::size_t>(std::max_element(&out[3 * s], &out[3 * s] + 3) - &out[3 * s] == labels[s]);
        REQUIRE(acc.evaluate() == static_cast<double>(correct) / n);
        const T mean = value_and_gradient<Classifier>(p, g, x, labels, SoftmaxCrossEntropy{});
        REQUIRE(ce.evaluate() == Approx(static_cast<double>(mean)).epsilon(std::is_same_v<T, float> ? 1e-5 : 1e-12));
        for (T& v : p) v *= T(1.5);
    }
    // a temporary vector would dangle: that overload is deleted
    STATIC_REQUIRE_FALSE(requires { validation_set<Classifier>(p, std::vector<T>(2 * n), labels, Accuracy{}); });
    STATIC_REQUIRE(requires { validation_set<Classifier>(p, std::span<const T>(x), labels, Accuracy{}); });
    labels[4] = 3;
    REQUIRE_THROWS_WITH(validation_set<Classifier>(p, x, labels, Accuracy{}), Catch::Contains("label 3 of sample 4"));
    REQUIRE_THROWS_WITH(validation_set<Classifier>(p, std::span(x).first(2 * n - 1), labels, Accuracy{}),
                        Catch::Contains("validation_set"));
}

TEST_CASE("fit: early stopping on a held-out loss keeps the best parameters it saw", "[fit][validation]") {
    // Few noisy samples and many epochs: training overfits, and the held-out loss of the parameters fit
    // returns is the best it reported.
    const auto train_set = make_data(48), held_out = make_data(400, 9);
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 3);
    Adam opt(3e-2f);
    FitOptions o;
    o.epochs = 300;
    o.batch = 16;
    o.validation = validation_set<Net>(p, held_out.x, held_out.y, SquaredError{});
    o.patience = 20;
    double best_seen = 1e300;
    o.on_epoch = [&](const EpochInfo& e) { best_seen = std::min(best_seen, e.validation); };
    const FitResult r = fit<Net>(p, SquaredError{}, train_set.x, train_set.y, opt, o);
    REQUIRE(r.stopped_early);
    REQUIRE(r.best_epoch + 20 == r.epochs);
    REQUIRE(r.best_validation == best_seen);
    REQUIRE(o.validation->evaluate() == r.best_validation);  // p holds the best epoch's parameters
}

}  // namespace test_fit
