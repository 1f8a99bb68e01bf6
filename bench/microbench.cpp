// Google Benchmark microbenchmarks of the tiny MLP (4 -> 32 tanh -> 16 tanh -> 4): the full-batch
// training step on 10,000 samples (gradient + Adam), and single-sample forward and forward + pullback;
// LeNet5's training step and layers; the gradient of one sample through two convolution nets.
// Run: chainlet_bench [--benchmark_filter=...]; thread counts are the benchmark argument.
#include <benchmark/benchmark.h>

#include <vector>

#include "chainlet/chainlet.hpp"

using namespace chainlet;
using TinyMLP = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;
using LeNet5 = Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2, 2>, Conv<5, 5, 16, ReLU>, MaxPool<2, 2>, Flatten,
                     Dense<120, ReLU>, Dense<84, ReLU>, Dense<10>>;

namespace {

std::vector<float> normal(std::size_t n, std::uint64_t seed) {
    Rng r(seed);
    std::vector<float> v(n);
    for (auto& e : v) e = static_cast<float>(r.normal());
    return v;
}

// FLOPs of one training sample of the tiny MLP: forward 704 multiply-adds, pullback 704 (dW) + 576 (dx).
constexpr double tiny_train_flops = 2.0 * 1984;

void BM_tiny_train_step(benchmark::State& state) {
    const int threads = static_cast<int>(state.range(0));
    const std::size_t n = 10000;
    std::vector<float> p(TinyMLP::num_params), g(TinyMLP::num_params);
    init_params<TinyMLP>(p, 1);
    const auto x = normal(4 * n, 2), y = normal(4 * n, 3);
    Workspace<TinyMLP, float> ws(n, threads);
    Adam opt(1e-3f);
    opt.init(p.size());
    for (auto _ : state) {
        value_and_gradient<TinyMLP>(ws, p, g, x, y, SquaredError{}, threads);
        opt.step(p, g);
        benchmark::ClobberMemory();
    }
    state.counters["GFLOP/s"] =
        benchmark::Counter(tiny_train_flops * n, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_tiny_train_step)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_tiny_forward_1(benchmark::State& state) {
    std::vector<float> p(TinyMLP::num_params), out(4);
    init_params<TinyMLP>(p, 1);
    auto x = normal(4, 2);
    Workspace<TinyMLP, float> ws(1, 1);
    for (auto _ : state) {
        predict<TinyMLP>(ws, p, x, out);
        benchmark::DoNotOptimize(out.data());
        x[0] += 1e-7f;  // a new input every call
    }
}
BENCHMARK(BM_tiny_forward_1);

void BM_tiny_forward_pullback_1(benchmark::State& state) {
    std::vector<float> p(TinyMLP::num_params), g(TinyMLP::num_params);
    init_params<TinyMLP>(p, 1);
    auto x = normal(4, 2);
    const auto y = normal(4, 3);
    Workspace<TinyMLP, float> ws(1, 1);
    for (auto _ : state) {
        benchmark::DoNotOptimize(value_and_gradient<TinyMLP>(ws, p, g, x, y, SquaredError{}));
        benchmark::DoNotOptimize(g.data());
        x[0] += 1e-7f;
    }
}
BENCHMARK(BM_tiny_forward_pullback_1);

// LeNet5 training step (gradient + Adam) on a batch of 2048 images; argument: threads.
void BM_lenet5_train_step(benchmark::State& state) {
    const int threads = static_cast<int>(state.range(0));
    const std::size_t n = 2048;
    std::vector<float> p(LeNet5::num_params), g(LeNet5::num_params);
    init_params<LeNet5>(p, 1);
    const auto x = normal(784 * n, 2);
    std::vector<std::int32_t> y(n);
    for (std::size_t s = 0; s < n; ++s) y[s] = static_cast<std::int32_t>(s % 10);
    Workspace<LeNet5, float> ws(n, threads);
    Adam opt(3e-4f);
    opt.init(p.size());
    for (auto _ : state) {
        value_and_gradient<LeNet5>(ws, p, g, x, y, SoftmaxCrossEntropy{}, threads);
        opt.step(p, g);
        benchmark::ClobberMemory();
    }
    state.counters["images/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_lenet5_train_step)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// One layer of LeNet5 on a chunk of 16 images (one AVX-512 vector of samples): forward, and pullback
// with the input gradient.
template <class L>
void layer_bench(benchmark::State& state, bool pullback) {
    const std::size_t n = 16;
    const auto p = normal(std::max<std::size_t>(L::num_params, 1), 1), x = normal(L::in_size * n, 2);
    std::vector<float> y(L::out_size * n), saved(L::saved_per_sample * n + 1), scratch(L::scratch_per_sample * n + 1),
        g(p.size()), dx(L::in_size * n), dy = normal(L::out_size * n, 3);
    L::forward(p.data(), x.data(), y.data(), saved.data(), n);
    for (auto _ : state) {
        if (pullback) {
            L::pullback(p.data(), g.data(), x.data(), y.data(), saved.data(), scratch.data(), dy.data(), dx.data(), n);
            benchmark::DoNotOptimize(dx.data());
        } else {
            L::forward(p.data(), x.data(), y.data(), saved.data(), n);
            benchmark::DoNotOptimize(y.data());
        }
    }
}
using Conv1 = LeNet5::layer<0>;
using Pool1 = LeNet5::layer<1>;
using Conv2 = LeNet5::layer<2>;
void BM_conv1_forward(benchmark::State& s) { layer_bench<Conv1>(s, false); }
void BM_conv1_pullback(benchmark::State& s) { layer_bench<Conv1>(s, true); }
void BM_pool1_forward(benchmark::State& s) { layer_bench<Pool1>(s, false); }
void BM_pool1_pullback(benchmark::State& s) { layer_bench<Pool1>(s, true); }
void BM_conv2_forward(benchmark::State& s) { layer_bench<Conv2>(s, false); }
void BM_conv2_pullback(benchmark::State& s) { layer_bench<Conv2>(s, true); }
BENCHMARK(BM_conv1_forward);
BENCHMARK(BM_conv1_pullback);
BENCHMARK(BM_pool1_forward);
BENCHMARK(BM_pool1_pullback);
BENCHMARK(BM_conv2_forward);
BENCHMARK(BM_conv2_pullback);

// One training sample through a convolution net (gradient only, 1 thread): the one-sample routes of
// Conv::forward_one and Conv::pullback_one. LeNet5, and the Conv1D net of bench/compare.cpp (64 steps of
// 4 channels, two same-padded convolutions, pooling, a Dense head).
using Conv1dNet = Chain<Input<64, 4>, Conv1D<5, 16, ReLU, Padding::same>, MaxPool1D<2>, Conv1D<5, 32, ReLU, Padding::same>,
                        MaxPool1D<2>, GlobalAvgPool, Dense<4>>;
// n samples' value_and_gradient on 1 thread.
template <class Net, class Targets, class Loss>
void gradient_of(benchmark::State& state, std::size_t n, const Targets& y, Loss loss) {
    std::vector<float> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, 1);
    const auto x = normal(n * Net::in_size, 2);
    Workspace<Net, float> ws(n, 1);
    for (auto _ : state) {
        value_and_gradient<Net>(ws, p, g, x, y, loss, 1);
        benchmark::ClobberMemory();
    }
}
void BM_lenet5_gradient_1(benchmark::State& s) {
    gradient_of<LeNet5>(s, 1, std::vector<std::int32_t>{3}, SoftmaxCrossEntropy{});
}
void BM_conv1d_net_gradient_1(benchmark::State& s) {
    gradient_of<Conv1dNet>(s, 1, normal(Conv1dNet::out_size, 3), SquaredError{});
}
BENCHMARK(BM_lenet5_gradient_1);
BENCHMARK(BM_conv1d_net_gradient_1);

// A few training samples through LeNet5 (1 thread): 3 run one at a time (Workspace::one_by_one with
// AVX-512 floats), 7 and 13 as one chunk padded to 16 (workspace.hpp); 16 for the whole vector.
void BM_lenet5_gradient_few(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    std::vector<std::int32_t> y(n);
    for (std::size_t s = 0; s < n; ++s) y[s] = static_cast<std::int32_t>(s % 10);
    gradient_of<LeNet5>(state, n, y, SoftmaxCrossEntropy{});
}
BENCHMARK(BM_lenet5_gradient_few)->Arg(3)->Arg(7)->Arg(13)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
