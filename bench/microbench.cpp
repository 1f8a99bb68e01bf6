// Google Benchmark microbenchmarks of the tiny MLP (4 -> 32 tanh -> 16 tanh -> 4): the full-batch
// training step on 10,000 samples (gradient + Adam), and single-sample forward and forward + pullback.
// Run: chainlet_bench [--benchmark_filter=...]; thread counts are the benchmark argument.
#include <benchmark/benchmark.h>

#include <vector>

#include "chainlet/chainlet.hpp"

using namespace chainlet;
using TinyMLP = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;

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

}  // namespace

BENCHMARK_MAIN();
