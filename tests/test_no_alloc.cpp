// A training step (value_and_gradient + optimiser step) performs no heap allocation once its
// workspace exists: every operator new in this program is counted.
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "alloc_counter.hpp"
#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_no_alloc {  // several test files make one program (tests/CMakeLists.txt)

using test::allocations;
using namespace chainlet;
using Tiny = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;

TEST_CASE("a training step allocates nothing: 1 sample, one chunk, many chunks on 2 threads", "[alloc]") {
    for (std::size_t n : {std::size_t(1), std::size_t(300), std::size_t(10000)}) {
        std::vector<float> p(Tiny::num_params), g(Tiny::num_params);
        init_params<Tiny>(p, 1);
        const auto x = test::random_vector<float>(4 * n, 2), y = test::random_vector<float>(4 * n, 3);
        Workspace<Tiny, float> ws(n, 2);
        Adam opt(1e-3f);
        opt.init(p.size());
        value_and_gradient<Tiny>(ws, p, g, x, y, SquaredError{}, 2);  // warm-up (OpenMP starts its threads)
        const long before = allocations.load();
        for (int step = 0; step < 20; ++step) {
            value_and_gradient<Tiny>(ws, p, g, x, y, SquaredError{}, 2);
            opt.step(p, g);
        }
        const long during_steps = allocations.load() - before;  // read before Catch's INFO allocates
        INFO("n=" << n);
        REQUIRE(during_steps == 0);
        std::vector<float> out(4 * n);
        predict<Tiny>(ws, p, x, out, 2);
        const long before_predict = allocations.load();
        predict<Tiny>(ws, p, x, out, 2);
        const long during_predict = allocations.load() - before_predict;
        REQUIRE(during_predict == 0);
    }
}

// predict pads a chunk of 2 to 7 floats to 8 (a vector of AVX2; workspace.hpp): the workspace made for
// the batch must have room for the padding, so that its first call does not grow it.
TEST_CASE("predict with a workspace made for its batch allocates nothing, also for a padded chunk", "[alloc]") {
    // LLVM's libomp sets itself up at the process's first OpenMP call (65 allocations under clang's ASan,
    // at -O0 from the __kmpc_global_thread_num that opens predict's parallel_for even on one thread);
    // GCC's libgomp does so when it is loaded. Counted here is the first predict, not the first call.
    (void)default_threads();
    for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(7), std::size_t(9), std::size_t(300)}) {
        std::vector<float> p(Tiny::num_params), out(4 * n);
        init_params<Tiny>(p, 1);
        const auto x = test::random_vector<float>(4 * n, 2);
        Workspace<Tiny, float> ws(n, 1);
        const long before = allocations.load();
        predict<Tiny>(ws, p, x, out, 1);
        const long during = allocations.load() - before;
        INFO("n=" << n);
        REQUIRE(during == 0);
    }
}

// value_and_gradient pads such a chunk too, its outputs and cotangent packed for the loss in a buffer of
// the workspace; a batch of up to Workspace::one_by_one samples runs one at a time. After the first call
// (which sizes the target buffer of every thread), no step allocates.
TEST_CASE("value_and_gradient allocates nothing for a padded chunk or a few samples", "[alloc]") {
    for (std::size_t n : {std::size_t(2), std::size_t(3), std::size_t(7), std::size_t(9), std::size_t(600)}) {
        std::vector<float> p(Tiny::num_params), g(Tiny::num_params);
        init_params<Tiny>(p, 1);
        const auto x = test::random_vector<float>(4 * n, 2), y = test::random_vector<float>(4 * n, 3);
        Workspace<Tiny, float> ws(n, 1);
        value_and_gradient<Tiny>(ws, p, g, x, y, SquaredError{}, 1);
        const long before = allocations.load();
        for (int step = 0; step < 5; ++step) value_and_gradient<Tiny>(ws, p, g, x, y, SquaredError{}, 1);
        const long during = allocations.load() - before;
        INFO("n=" << n);
        REQUIRE(during == 0);
    }
}

TEST_CASE("the counter sees allocations (the test above could fail)", "[alloc]") {
    const long before = allocations.load();
    // through a volatile pointer: the compiler may not elide the two allocations (g++ -O1 did, one of them)
    static std::vector<float>* volatile sink;
    sink = new std::vector<float>(100);
    delete sink;
    REQUIRE(allocations.load() - before >= 2);
}

namespace {
// fit of the tiny MLP, 3 epochs of batches of 256 on 2 threads with options o: the most allocations
// between two consecutive steps (on_step calls), and how many steps had a gradient longer than clip.
std::pair<long, std::size_t> worst_step_allocations(FitOptions o, double clip = 0) {
    const std::size_t n = 2000;
    std::vector<float> p(Tiny::num_params);
    init_params<Tiny>(p, 1);
    const auto x = test::random_vector<float>(4 * n, 2), y = test::random_vector<float>(4 * n, 3);
    Adam opt(1e-3f);
    long at_last_step = -1, worst = 0;
    std::size_t longer = 0;
    o.epochs = 3;
    o.batch = 256;
    o.threads = 2;
    o.on_step = [&](const StepInfo& s) {
        const long now = allocations.load();
        if (at_last_step >= 0) worst = std::max(worst, now - at_last_step);
        at_last_step = now;
        longer += s.gradient_norm > clip;
    };
    fit<Tiny>(p, SquaredError{}, x, y, opt, o);
    REQUIRE(at_last_step >= 0);
    return {worst, longer};
}
}  // namespace

TEST_CASE("fit allocates nothing inside its steps", "[alloc]") {
    REQUIRE(worst_step_allocations({}).first == 0);
}

TEST_CASE("a training step with a schedule, clipping and penalties allocates nothing", "[alloc]") {
    FitOptions o;
    o.schedule = CosineWarmup{5, 20};
    o.clip_norm = 0.01;
    o.penalties = {penalty_on_layer<Tiny>(0, 1e-4, 1e-4), penalty_on_layer<Tiny>(2, 0, 1e-3)};
    const auto [worst, clipped] = worst_step_allocations(o, 0.01);
    REQUIRE(clipped > 0);
    REQUIRE(worst == 0);
}

TEST_CASE("a training step through containers allocates nothing", "[alloc][containers]") {
    using Net = Chain<Input<6>, Parallel<Concat, Branch<Dense<8, Tanh>>, Branch<Slice<2, 3>, Dense<4, GELU>>>,
                      Residual<Dense<12, Tanh>, Dense<12>>, Parallel<Dot, Branch<Dense<5>>, Branch<Dense<5, Tanh>>>>;
    const std::size_t n = 3000;
    std::vector<float> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, 1);
    const auto x = test::random_vector<float>(6 * n, 2), y = test::random_vector<float>(n, 3);
    Workspace<Net, float> ws(n, 2);
    Adam opt(1e-3f);
    opt.init(p.size());
    value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, 2);
    const long before = allocations.load();
    for (int step = 0; step < 10; ++step) {
        value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, 2);
        opt.step(p, g);
    }
    const long during_steps = allocations.load() - before;
    REQUIRE(during_steps == 0);
}

TEST_CASE("a training step of a chain with Dropout, LayerNorm and RMSNorm allocates nothing", "[alloc][dropout]") {
    using Net = Chain<Input<4>, Dense<32, GELUExact>, Dropout<25>, LayerNorm, Dense<16, ELU>, RMSNorm, Dropout<10>,
                      Dense<4>, ActivationLayer<Tanh>>;
    for (std::size_t n : {std::size_t(1), std::size_t(300), std::size_t(5000)}) {
        std::vector<float> p(Net::num_params), g(Net::num_params);
        init_params<Net>(p, 1);
        const auto x = test::random_vector<float>(4 * n, 2), y = test::random_vector<float>(4 * n, 3);
        Workspace<Net, float> ws(n, 2);
        Adam opt(1e-3f);
        opt.init(p.size());
        value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, 2);  // warm-up (OpenMP starts its threads)
        const long before = allocations.load();
        for (std::uint64_t step = 0; step < 20; ++step) {
            value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, 2, Pass{.training = true, .seed = 3, .step = step});
            opt.step(p, g);
        }
        const long during_steps = allocations.load() - before;
        INFO("n=" << n);
        REQUIRE(during_steps == 0);
    }
}

}  // namespace test_no_alloc
