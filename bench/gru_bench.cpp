// A GRU against LibTorch, side by side in one process (the method of bench/compare.cpp: the same model,
// batch, optimiser and thread count; data in memory; warm-up excluded; the two sides alternate round by
// round; medians of the per-iteration times), and the fp32 FMA peak measured in the same run.
//
//   model:  Chain<Input<50, 4>, GRU<32>, Dense<1>>  =  nn.GRU(4, 32, batch_first=True), output[:, -1],
//           nn.Linear(32, 1)
//   train:  squared error + Adam step on a batch of 256 sequences
//   infer:  one sequence (predict on a single sample, LibTorch under NoGradGuard)
//
//   chainlet_gru_bench [--quick] [--json FILE] [--threads T]
//
// bench/pytorch/gru.py times the same workloads in PyTorch (Python). The workload names are those a
// row of bench/compare.cpp would carry, so the two can be folded into the comparison table.
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

constexpr std::size_t T = 50, F = 4, H = 32, batch = 256;
using GruNet = Chain<Input<T, F>, GRU<H>, Dense<1>>;

// Multiply-adds per sample. Forward: per step the 3H gate rows against x_t (F) and h_{t-1} (H), then the
// Dense head. Training adds the weight gradients (as many again) and the gradient reaching h_{t-1}
// (3H x H per step); no input gradient (the GRU is the first layer). Elementwise gate work not counted.
constexpr double gru_forward_macs = double(T) * 3 * H * (F + H) + H;
constexpr double gru_train_macs = 2 * gru_forward_macs + double(T) * 3 * H * H;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<float> normal(std::size_t n, std::uint64_t seed) {
    Rng r(seed);
    std::vector<float> v(n);
    for (auto& e : v) e = static_cast<float>(r.normal());
    return v;
}

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
    double flops, peak;
    double chainlet_s, libtorch_s;
};

Row compare(const std::string& name, int threads, double flops, double peak, const std::function<void()>& ours,
            const std::function<void()>& theirs, int rounds, double target) {
    torch::set_num_threads(threads);
    Timer ta, tb;
    ta.run(ours, target / 2);
    tb.run(theirs, target / 2);
    std::vector<double> a, b;
    for (int r = 0; r < rounds; ++r) {
        a.push_back(ta.run(ours, target));
        b.push_back(tb.run(theirs, target));
    }
    Row row{name, threads, flops, peak, median(a), median(b)};
    const double gflops = flops / row.chainlet_s / 1e9;
    std::printf("%-46s %3d  %12.3f us %12.3f us  %8.2fx  %7.1f GFLOP/s (%.1f%% of peak)\n", name.c_str(), threads,
                1e6 * row.chainlet_s, 1e6 * row.libtorch_s, row.libtorch_s / row.chainlet_s, gflops,
                100 * gflops / peak);
    std::fflush(stdout);
    return row;
}

struct TorchGru : torch::nn::Module {
    torch::nn::GRU gru{nullptr};
    torch::nn::Linear head{nullptr};
    TorchGru() {
        gru = register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(F, H).batch_first(true)));
        head = register_module("head", torch::nn::Linear(H, 1));
    }
    torch::Tensor forward(const torch::Tensor& x) {
        auto out = std::get<0>(gru->forward(x));
        return head->forward(out.select(1, static_cast<std::int64_t>(T) - 1));
    }
};

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
            std::fprintf(stderr, "usage: chainlet_gru_bench [--quick] [--json FILE] [--threads T]\n");
            return 2;
        }
    }
    const int rounds = quick ? 3 : 7;
    const double target = quick ? 0.05 : 0.2;
    torch::manual_seed(0);
    std::printf("%s\nlibtorch %s\n", build_report().c_str(), TORCH_VERSION);
    std::vector<int> thread_counts = {1};
    if (max_threads > 1) thread_counts.push_back(max_threads);

    // Data and models, built before any timing.
    const auto x = normal(batch * GruNet::in_size, 1), y = normal(batch, 2);
    std::vector<float> p(GruNet::num_params), g(GruNet::num_params), one_out(1);
    init_params<GruNet>(p, 3);
    Adam opt(1e-3f);
    opt.init(p.size());
    const std::vector<float> one(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(GruNet::in_size));
    const auto tx = torch::from_blob(const_cast<float*>(x.data()), {std::int64_t(batch), std::int64_t(T), std::int64_t(F)})
                        .clone();
    const auto ty = torch::from_blob(const_cast<float*>(y.data()), {std::int64_t(batch), 1}).clone();
    const auto tone = tx.slice(0, 0, 1).clone();
    auto model = std::make_shared<TorchGru>();
    torch::optim::Adam topt(model->parameters(), torch::optim::AdamOptions(1e-3));

    std::printf("%-46s %3s  %15s %15s  %9s\n", "workload", "thr", "chainlet", "libtorch", "ratio");
    std::vector<Row> rows;
    for (int t : thread_counts) {
        const double peak = bench::fma_peak_gflops(t);
        std::printf("fp32 FMA peak, %d thread(s): %.1f GFLOP/s\n", t, peak);
        Workspace<GruNet, float> ws(batch, t);
        rows.push_back(compare(
            "gru32 T50 F4 train step (batch 256, Adam)", t, 2 * gru_train_macs * batch, peak,
            [&] {
                value_and_gradient<GruNet>(ws, p, g, x, y, SquaredError{}, t);
                opt.step(p, g);
            },
            [&] {
                topt.zero_grad();
                auto loss = torch::mse_loss(model->forward(tx), ty);
                loss.backward();
                topt.step();
            },
            rounds, target));
        Workspace<GruNet, float> ws1(1, t);
        rows.push_back(compare(
            "gru32 T50 F4 inference (one sequence)", t, 2 * gru_forward_macs, peak,
            [&] { predict<GruNet>(ws1, p, one, one_out, t); },
            [&] {
                torch::NoGradGuard no_grad;
                auto out = model->forward(tone);
                (void)out;
            },
            rounds, target));
    }

    if (!json.empty()) {
        std::ofstream out(json);
        out << "[\n";
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const Row& r = rows[i];
            out << "  {\"workload\": \"" << r.workload << "\", \"threads\": " << r.threads << ", \"flops\": " << r.flops
                << ", \"fma_peak_gflops\": " << r.peak << ", \"chainlet_seconds\": " << r.chainlet_s
                << ", \"libtorch_seconds\": " << r.libtorch_s << "}" << (i + 1 < rows.size() ? ",\n" : "\n");
        }
        out << "]\n";
    }
    return 0;
}
