// chainlet against LibTorch, side by side in one process: the same model, batch, optimiser and
// thread count; data in memory before timing; warm-up excluded; the two sides alternate round by
// round and each reports the median time per iteration. Also measures this machine's fp32 FMA peak
// in the same run, so chainlet's GFLOP/s can be stated as a fraction of it.
//
//   chainlet_compare [--quick] [--json FILE] [--threads T]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "fma_peak.hpp"

using namespace chainlet;

namespace {

using TinyMLP = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;
using WideMLP = Chain<Input<2>, Dense<64, Tanh>, Dense<64, Tanh>, Dense<2>>;
using LeNet5 = Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2, 2>, Conv<5, 5, 16, ReLU>, MaxPool<2, 2>, Flatten,
                     Dense<120, ReLU>, Dense<84, ReLU>, Dense<10>>;

// Multiply-adds per sample. Training: forward + weight gradients + input gradients of every layer but
// the first; LeNet5's input gradient of conv2 is counted as the useful 8*8*16*150, not the padded
// correlation chainlet actually runs.
constexpr double tiny_train_macs = 1984, tiny_forward_macs = 704;
constexpr double wide_train_macs = 3 * (2 * 64 + 64 * 64 + 64 * 2) - 2 * 64;
constexpr double lenet_forward_macs = 24 * 24 * 6 * 25 + 8 * 8 * 16 * 150 + 256 * 120 + 120 * 84 + 84 * 10;
constexpr double lenet_train_macs = 2 * lenet_forward_macs + 8 * 8 * 16 * 150 + 256 * 120 + 120 * 84 + 84 * 10;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<float> normal(std::size_t n, std::uint64_t seed) {
    Rng r(seed);
    std::vector<float> v(n);
    for (auto& e : v) e = static_cast<float>(r.normal());
    return v;
}

// Per-iteration time of f: calls it in blocks of `iters` (sized on the first block to take ~target
// seconds) and returns the block time / iters of one block; the caller takes medians over rounds.
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

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Row {
    std::string workload;
    int threads;
    double flops;  // per iteration, chainlet's count (0: not stated)
    double chainlet_s, libtorch_s;
};

struct Side {
    std::function<void()> setup;  // untimed, before the warm-up
    std::function<void()> step;
};

Row compare(const std::string& name, int threads, double flops, Side ours, Side theirs, int rounds, double target) {
    torch::set_num_threads(threads);
    ours.setup();
    theirs.setup();
    Timer ta, tb;
    ta.run(ours.step, target / 2);  // warm-up, also sizes the blocks
    tb.run(theirs.step, target / 2);
    std::vector<double> a, b;
    for (int r = 0; r < rounds; ++r) {
        a.push_back(ta.run(ours.step, target));
        b.push_back(tb.run(theirs.step, target));
    }
    Row row{name, threads, flops, median(a), median(b)};
    std::printf("%-46s %3d  %12.3f us %12.3f us  %8.1fx", name.c_str(), threads, 1e6 * row.chainlet_s,
                1e6 * row.libtorch_s, row.libtorch_s / row.chainlet_s);
    if (flops > 0) std::printf("  %7.1f GFLOP/s", flops / row.chainlet_s / 1e9);
    std::printf("\n");
    std::fflush(stdout);
    return row;
}

// The tiny MLP in LibTorch: nn.Sequential(Linear(4,32), Tanh, Linear(32,16), Tanh, Linear(16,4)).
torch::nn::Sequential torch_tiny() {
    return torch::nn::Sequential(torch::nn::Linear(4, 32), torch::nn::Tanh(), torch::nn::Linear(32, 16),
                                 torch::nn::Tanh(), torch::nn::Linear(16, 4));
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    std::string json;
    int max_threads = default_threads();
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick") quick = true;
        else if (a == "--json" && i + 1 < argc) json = argv[++i];
        else if (a == "--threads" && i + 1 < argc) max_threads = std::stoi(argv[++i]);
        else {
            std::fprintf(stderr, "usage: chainlet_compare [--quick] [--json FILE] [--threads T]\n");
            return 2;
        }
    }
    const int rounds = quick ? 3 : 7;
    const double target = quick ? 0.05 : 0.2;
    torch::manual_seed(0);
    std::printf("%s\nlibtorch %s\n", build_report().c_str(), TORCH_VERSION);

    std::vector<int> thread_counts = {1};
    if (max_threads > 1) thread_counts.push_back(max_threads);
    std::vector<std::pair<int, double>> peaks;
    for (int t : thread_counts) {
        const double peak = bench::fma_peak_gflops(t);
        peaks.emplace_back(t, peak);
        std::printf("fp32 FMA peak, %d thread(s): %.1f GFLOP/s\n", t, peak);
    }
    std::printf("%-46s %3s  %15s %15s  %9s\n", "workload", "thr", "chainlet", "libtorch", "ratio");

    std::vector<Row> rows;
    // 1. Tiny MLP, full-batch training step on 10,000 samples, Adam(1e-3).
    {
        const std::size_t n = 10000;
        const auto x = normal(4 * n, 1), y = normal(4 * n, 2);
        std::vector<float> p(TinyMLP::num_params), g(TinyMLP::num_params);
        init_params<TinyMLP>(p, 1);
        const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {static_cast<long>(n), 4}).clone();
        const torch::Tensor ty = torch::from_blob(const_cast<float*>(y.data()), {static_cast<long>(n), 4}).clone();
        for (int t : thread_counts) {
            Workspace<TinyMLP, float> ws;
            Adam opt(1e-3f);
            auto model = torch_tiny();
            torch::optim::Adam topt(model->parameters(), torch::optim::AdamOptions(1e-3));
            rows.push_back(compare(
                "tiny MLP train step, 10k samples", t, 2.0 * tiny_train_macs * n,
                {[&] { ws.reserve(n, t); opt.init(p.size()); },
                 [&] {
                     value_and_gradient<TinyMLP>(ws, p, g, x, y, SquaredError{}, t);
                     opt.step(p, g);
                 }},
                {[] {},
                 [&] {
                     topt.zero_grad();
                     auto loss = torch::mse_loss(model->forward(tx), ty);
                     loss.backward();
                     topt.step();
                 }},
                rounds, target));
        }
    }
    // 2. The same model, one sample: forward, and forward + pullback (gradient of a squared loss).
    {
        std::vector<float> p(TinyMLP::num_params), g(TinyMLP::num_params), out(4);
        init_params<TinyMLP>(p, 1);
        auto x = normal(4, 3);
        const auto y = normal(4, 4);
        Workspace<TinyMLP, float> ws(1, 1);
        auto model = torch_tiny();
        const torch::Tensor tx = torch::randn({1, 4}), ty = torch::randn({1, 4});
        // One sample is one chunk: a second thread has nothing to do on either side, but the rows are
        // measured at every thread count as the others are.
        for (int t : thread_counts) {
            rows.push_back(compare(
                "tiny MLP forward, 1 sample", t, 2.0 * tiny_forward_macs, {[] {}, [&] { predict<TinyMLP>(ws, p, x, out, t); }},
                {[] {},
                 [&] {
                     torch::NoGradGuard no_grad;
                     auto r = model->forward(tx);
                 }},
                rounds, target));
            rows.push_back(compare(
                "tiny MLP forward+pullback, 1 sample", t, 2.0 * tiny_train_macs,
                {[] {}, [&] { value_and_gradient<TinyMLP>(ws, p, g, x, y, SquaredError{}, t); }},
                {[] {},
                 [&] {
                     model->zero_grad();
                     torch::mse_loss(model->forward(tx), ty).backward();
                 }},
                rounds, target));
        }
    }

    // 3. A wider MLP of scientific ML (2 -> 64 tanh -> 64 tanh -> 2), Adam training step at batch 1, 32, 256.
    for (std::size_t n : {std::size_t(1), std::size_t(32), std::size_t(256)}) {
        const auto x = normal(2 * n, 5), y = normal(2 * n, 6);
        std::vector<float> p(WideMLP::num_params), g(WideMLP::num_params);
        init_params<WideMLP>(p, 1);
        const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {static_cast<long>(n), 2}).clone();
        const torch::Tensor ty = torch::from_blob(const_cast<float*>(y.data()), {static_cast<long>(n), 2}).clone();
        for (int t : thread_counts) {
            Workspace<WideMLP, float> ws;
            Adam opt(1e-3f);
            auto model = torch::nn::Sequential(torch::nn::Linear(2, 64), torch::nn::Tanh(), torch::nn::Linear(64, 64),
                                               torch::nn::Tanh(), torch::nn::Linear(64, 2));
            torch::optim::Adam topt(model->parameters(), torch::optim::AdamOptions(1e-3));
            rows.push_back(compare(
                "wide MLP train step, batch " + std::to_string(n), t, 2.0 * wide_train_macs * static_cast<double>(n),
                {[&] { ws.reserve(n, t); opt.init(p.size()); },
                 [&] {
                     value_and_gradient<WideMLP>(ws, p, g, x, y, SquaredError{}, t);
                     opt.step(p, g);
                 }},
                {[] {},
                 [&] {
                     topt.zero_grad();
                     torch::mse_loss(model->forward(tx), ty).backward();
                     topt.step();
                 }},
                rounds, target));
        }
    }
    // 4. LeNet5: one training epoch (batch 2048, Adam(3e-4), no shuffling on either side) and inference
    //    on 10,000 images. Random images: the cost does not depend on the pixel values.
    {
        const std::size_t n = quick ? 8192 : 60000, batch = 2048, n_test = 10000;
        const auto x = normal(n * 784, 7), xt = normal(n_test * 784, 8);
        std::vector<std::int32_t> y(n);
        for (std::size_t s = 0; s < n; ++s) y[s] = static_cast<std::int32_t>(s % 10);
        const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {static_cast<long>(n), 1, 28, 28}).clone();
        const torch::Tensor txt = torch::from_blob(const_cast<float*>(xt.data()), {static_cast<long>(n_test), 1, 28, 28}).clone();
        const torch::Tensor ty = torch::from_blob(y.data(), {static_cast<long>(n)}, torch::kInt32).to(torch::kLong);
        std::vector<float> p(LeNet5::num_params), out(n_test * 10);
        init_params<LeNet5>(p, 1);
        for (int t : thread_counts) {
            namespace nn = torch::nn;
            auto model = nn::Sequential(nn::Conv2d(1, 6, 5), nn::ReLU(), nn::MaxPool2d(2), nn::Conv2d(6, 16, 5), nn::ReLU(),
                                        nn::MaxPool2d(2), nn::Flatten(), nn::Linear(256, 120), nn::ReLU(),
                                        nn::Linear(120, 84), nn::ReLU(), nn::Linear(84, 10));
            torch::optim::Adam topt(model->parameters(), torch::optim::AdamOptions(3e-4));
            Adam opt(3e-4f);
            Workspace<LeNet5, float> train_ws;
            std::vector<float> g(LeNet5::num_params);
            const std::string images = quick ? "8192 images" : "60k images";
            // The steps fit() runs, with the workspace and optimiser kept from epoch to epoch (as the
            // LibTorch model and optimiser are).
            rows.push_back(compare(
                "LeNet5 train epoch, " + images + ", batch 2048", t, 2.0 * lenet_train_macs * static_cast<double>(n),
                {[&] { train_ws.reserve(batch, t); opt.init(p.size()); },
                 [&] {
                     for (std::size_t b0 = 0; b0 < n; b0 += batch) {
                         const std::size_t m = std::min(batch, n - b0);
                         value_and_gradient<LeNet5>(train_ws, p, g, std::span<const float>(x).subspan(b0 * 784, m * 784),
                                                    std::span<const std::int32_t>(y).subspan(b0, m),
                                                    SoftmaxCrossEntropy{}, t);
                         opt.step(p, g);
                     }
                 }},
                {[] {},
                 [&] {
                     for (std::size_t b0 = 0; b0 < n; b0 += batch) {
                         const long m = static_cast<long>(std::min(batch, n - b0));
                         topt.zero_grad();
                         torch::nn::functional::cross_entropy(model->forward(tx.narrow(0, static_cast<long>(b0), m)),
                                                              ty.narrow(0, static_cast<long>(b0), m))
                             .backward();
                         topt.step();
                     }
                 }},
                rounds, target));
            Workspace<LeNet5, float> ws;
            rows.push_back(compare(
                "LeNet5 inference, 10k images", t, 2.0 * lenet_forward_macs * static_cast<double>(n_test),
                {[&] { ws.reserve(n_test, t); }, [&] { predict<LeNet5>(ws, p, xt, out, t); }},
                {[] {},
                 [&] {
                     torch::NoGradGuard no_grad;
                     auto r = model->forward(txt);
                 }},
                rounds, target));
        }
    }

    if (!json.empty()) {
        std::ofstream out(json);
        out << "{\n \"cpu\": \"" << cpu_model() << "\",\n \"simd\": \"" << simd::arch_name
            << "\",\n \"threads\": " << max_threads << ",\n \"libtorch\": \"" << TORCH_VERSION
            << "\",\n \"compiler\": \"g++ " << __VERSION__ << "\",\n \"quick\": " << (quick ? "true" : "false")
            << ",\n \"peak_gflops\": {";
        for (std::size_t i = 0; i < peaks.size(); ++i)
            out << (i ? ", " : "") << "\"" << peaks[i].first << "\": " << peaks[i].second;
        out << "},\n \"rows\": [\n";
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const Row& r = rows[i];
            out << "  {\"workload\": \"" << r.workload << "\", \"threads\": " << r.threads
                << ", \"chainlet_seconds\": " << r.chainlet_s << ", \"libtorch_seconds\": " << r.libtorch_s
                << ", \"flops\": " << r.flops << "}" << (i + 1 < rows.size() ? ",\n" : "\n");
        }
        out << " ]\n}\n";
    }
    return 0;
}
