// Conv1D training-step benchmark (issue 13), chainlet side; bench/pytorch/conv1d.py is the PyTorch side
// with the same models, batch, optimiser, thread counts and timing rules (data in memory, warm-up
// excluded, blocks of calls sized to ~0.2 s, median of 7 rounds). Standalone until it joins
// bench/compare.cpp (see the report of branch layers13b); header-only, so it builds without CMake:
//
//   g++ -std=c++20 -O3 -DNDEBUG -march=native -fopenmp -Iinclude bench/conv1d_bench.cpp -o conv1d_bench
//   ./conv1d_bench [--quick] [--threads T]
//
// Rows (batch 256 sequences of 64 steps x 4 channels, Adam(1e-3), squared error on 4 outputs):
//   conv1d net:          Conv1D<5,16,ReLU,same> MaxPool1D<2> Conv1D<5,32,ReLU,same> MaxPool1D<2> GlobalAvgPool Dense<4>
//                        (stride 1: the tiled convolution kernels)
//   strided conv1d net:  Conv1D<5,16,ReLU,same,1,dilation 2> Conv1D<4,32,ReLU,valid,stride 2> GlobalAvgPool Dense<4>
//                        (the loop nest of kernels/conv_strided.hpp)
// and the conv1d net's forward pass on one sequence. GFLOP/s counts 2 flops per useful multiply-add
// (taps on the zero padding excluded), as a fraction of this machine's fp32 FMA peak measured in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../bench/fma_peak.hpp"
#include "chainlet/chainlet.hpp"

using namespace chainlet;

namespace {

using Conv1dNet = Chain<Input<64, 4>, Conv1D<5, 16, ReLU, Padding::same>, MaxPool1D<2>, Conv1D<5, 32, ReLU, Padding::same>,
                        MaxPool1D<2>, GlobalAvgPool, Dense<4>>;
using StridedConv1dNet = Chain<Input<64, 4>, Conv1D<5, 16, ReLU, Padding::same, 1, 2>,
                               Conv1D<4, 32, ReLU, Padding::valid, 2>, GlobalAvgPool, Dense<4>>;

// Useful multiply-adds per sample. Same padding: output position l of a K-tap kernel over L inputs
// reaches min(L, l + K - pad) - max(0, l - pad) (times dilation stride) real inputs; counted exactly.
constexpr double same_conv_taps(std::size_t L, std::size_t K, std::size_t D) {
    const std::size_t span = D * (K - 1) + 1, pad = (span - 1) / 2;
    double taps = 0;
    for (std::size_t l = 0; l < L; ++l)
        for (std::size_t k = 0; k < K; ++k) {
            const long i = static_cast<long>(l + k * D) - static_cast<long>(pad);
            if (i >= 0 && i < static_cast<long>(L)) taps += 1;
        }
    return taps;
}
// forward: conv1 + conv2 + dense; train: forward + weight gradients (the same count) + input gradients
// of every layer but the first.
constexpr double a_conv1 = same_conv_taps(64, 5, 1) * 4 * 16, a_conv2 = same_conv_taps(32, 5, 1) * 16 * 32,
                 a_dense = 32 * 4;
constexpr double a_forward = a_conv1 + a_conv2 + a_dense, a_train = 2 * a_forward + a_conv2 + a_dense;
constexpr double b_conv1 = same_conv_taps(64, 5, 2) * 4 * 16, b_conv2 = 31.0 * 4 * 16 * 32, b_dense = 32 * 4;
constexpr double b_forward = b_conv1 + b_conv2 + b_dense, b_train = 2 * b_forward + b_conv2 + b_dense;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<float> normal(std::size_t n, std::uint64_t seed) {
    Rng r(seed);
    std::vector<float> v(n);
    for (auto& e : v) e = static_cast<float>(r.normal());
    return v;
}

// Seconds per call of f in a block of calls sized (on the first use) to take about `target` seconds.
struct Timer {
    std::size_t iters = 0;
    double run(const std::function<void()>& f, double target) {
        if (iters == 0) {
            std::size_t k = 1;
            for (;;) {
                const auto t0 = std::chrono::steady_clock::now();
                for (std::size_t i = 0; i < k; ++i) f();
                const double t = seconds_since(t0);
                if (t > target / 4 || k > (1u << 28)) {
                    iters = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(k) * target / t));
                    break;
                }
                k *= 4;
            }
        }
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < iters; ++i) f();
        return seconds_since(t0) / static_cast<double>(iters);
    }
};

void measure(const std::string& name, int threads, double flops, double peak, const std::function<void()>& step,
             int rounds, double target) {
    Timer timer;
    timer.run(step, target / 2);  // warm-up, sizes the blocks
    std::vector<double> t;
    for (int r = 0; r < rounds; ++r) t.push_back(timer.run(step, target));
    std::sort(t.begin(), t.end());
    const double s = t[t.size() / 2];
    std::printf("%-46s %3d  %12.3f us  %7.1f GFLOP/s  %5.1f %% of FMA peak\n", name.c_str(), threads, 1e6 * s,
                flops / s / 1e9, 100 * flops / s / 1e9 / peak);
    std::fflush(stdout);
}

template <class Net>
void train_row(const std::string& name, int threads, double macs, double peak, int rounds, double target) {
    const std::size_t n = 256;
    const auto x = normal(Net::in_size * n, 1), y = normal(Net::out_size * n, 2);
    std::vector<float> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, 1);
    Workspace<Net, float> ws(n, threads);
    Adam opt(1e-3f);
    opt.init(p.size());
    measure(name, threads, 2 * macs * n, peak,
            [&] {
                value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, threads);
                opt.step(p, g);
            },
            rounds, target);
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    int max_threads = default_threads();
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick") quick = true;
        else if (a == "--threads" && i + 1 < argc) max_threads = std::stoi(argv[++i]);
        else {
            std::fprintf(stderr, "usage: conv1d_bench [--quick] [--threads T]\n");
            return 2;
        }
    }
    const int rounds = quick ? 3 : 7;
    const double target = quick ? 0.05 : 0.2;
    std::printf("chainlet conv1d benchmark, SIMD %s\n", simd::arch_name);
    std::vector<int> thread_counts = {1};
    if (max_threads > 1) thread_counts.push_back(max_threads);
    for (int t : thread_counts) {
        const double peak = bench::fma_peak_gflops(t);
        std::printf("fp32 FMA peak, %d thread(s): %.1f GFLOP/s\n", t, peak);
        train_row<Conv1dNet>("conv1d net train step, batch 256", t, a_train, peak, rounds, target);
        train_row<StridedConv1dNet>("strided conv1d net train step, batch 256", t, b_train, peak, rounds, target);
        std::vector<float> p(Conv1dNet::num_params), out(Conv1dNet::out_size);
        init_params<Conv1dNet>(p, 1);
        const auto x = normal(Conv1dNet::in_size, 3);
        Workspace<Conv1dNet, float> ws(1, 1);
        measure("conv1d net forward, 1 sequence", t, 2 * a_forward, peak, [&] { predict<Conv1dNet>(ws, p, x, out, t); },
                rounds, target);
    }
    return 0;
}
