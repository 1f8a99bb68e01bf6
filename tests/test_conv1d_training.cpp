// Networks of Conv1D and strided Conv layers train to the same bits on 1, 2 and 3 threads and allocate
// nothing in a step.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_conv1d_training {

using namespace chainlet;

namespace {

// Conv1D with same padding, stride and dilation, both 1-D pools and GlobalAvgPool; and a strided Conv
// with AvgPool and a Flatten.
using SeqNet = Chain<Input<24, 3>, Conv1D<5, 8, ReLU, Padding::same>, MaxPool1D<2>, Conv1D<3, 8, Tanh, Padding::valid, 2, 2>,
                     AvgPool1D<2>, GlobalAvgPool, Dense<4>>;
using StridedNet = Chain<Input<11, 11, 2>, Conv<3, 3, 6, Tanh, Padding::valid, 2>, AvgPool<2>, Flatten, Dense<4>>;

template <class Net>
std::vector<float> train(const std::vector<float>& x, const std::vector<float>& y, std::size_t batch, int threads) {
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 5);
    Adam opt(1e-3f);
    FitOptions o;
    o.epochs = 2;
    o.batch = batch;
    o.seed = 9;
    o.threads = threads;
    fit<Net>(p, SquaredError{}, x, y, opt, o);
    return p;
}

template <class Net>
void require_same_bits_on_any_thread_count() {
    using WS = Workspace<Net, float>;
    const std::size_t batch = 3 * WS::chunk + 5, n = 3 * batch;
    const auto x = test::random_vector<float>(Net::in_size * n, 3), y = test::random_vector<float>(Net::out_size * n, 4);
    const auto p1 = train<Net>(x, y, batch, 1);
    std::vector<float> p0(Net::num_params);
    init_params<Net>(p0, 5);
    REQUIRE(p1 != p0);  // training moved the parameters
    REQUIRE(p1 == train<Net>(x, y, batch, 2));
    REQUIRE(p1 == train<Net>(x, y, batch, 3));
}

template <class Net>
void require_no_allocation_in_a_step() {
    for (std::size_t n : {std::size_t(1), std::size_t(300)}) {
        std::vector<float> p(Net::num_params), g(Net::num_params);
        init_params<Net>(p, 1);
        const auto x = test::random_vector<float>(Net::in_size * n, 2), y = test::random_vector<float>(Net::out_size * n, 3);
        Workspace<Net, float> ws(n, 2);
        Adam opt(1e-3f);
        opt.init(p.size());
        value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, 2);  // warm-up (OpenMP starts its threads)
        std::vector<float> out(Net::out_size * n);
        predict<Net>(ws, p, x, out, 2);
        const long before = test::allocations.load();
        for (int step = 0; step < 5; ++step) {
            value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, 2);
            opt.step(p, g);
        }
        predict<Net>(ws, p, x, out, 2);
        const long during = test::allocations.load() - before;  // read before Catch's INFO allocates
        INFO("n=" << n);
        REQUIRE(during == 0);
    }
}

}  // namespace

TEST_CASE("Conv1D and strided-conv nets train to the same bits on 1, 2 and 3 threads", "[conv1d][repro][parallel]") {
    require_same_bits_on_any_thread_count<SeqNet>();
    require_same_bits_on_any_thread_count<StridedNet>();
}

TEST_CASE("Conv1D and strided-conv nets: a training step and predict allocate nothing", "[conv1d][alloc]") {
    require_no_allocation_in_a_step<SeqNet>();
    require_no_allocation_in_a_step<StridedNet>();
}

}  // namespace test_conv1d_training
