// chainlet against LibTorch, side by side in one process: the same model, batch, optimiser and
// thread count; data in memory before timing; warm-up excluded; the two sides alternate round by
// round and each reports the median time per iteration. Also measures this machine's fp32 FMA peak
// in the same run, so chainlet's GFLOP/s can be stated as a fraction of it. Besides the rows, an
// inference latency grid (tiny MLP and LeNet5 at batch 1, 2, 4, ..., 2048) and the first-step cost
// (the first call on a fresh workspace / optimiser, what a program pays once per start). Rows: the tiny
// MLP (full-batch step, one-sample forward and forward + pullback), a wider MLP at batch 1/32/256, LeNet5
// (epoch, inference), a GRU and a Conv1D net (step, one-sequence inference), the PINN Adam step (float32,
// float64).
//
// The same source builds against Debian's LibTorch 1.13 (chainlet_compare) and against the LibTorch
// inside the PyTorch wheel (chainlet_compare_torch2, see bench/CMakeLists.txt): one LibTorch per
// process, as two versions export the same symbols.
//
//   chainlet_compare [--quick] [--json FILE] [--threads T | --thread-count T] [--only S] [--chainlet-only]
//     --threads T       rows with 1 and with T threads (default T: all)
//     --thread-count T  rows with T threads only (bench/compare.sh pins each count with taskset)
//     --only S          only the rows whose workload name contains S or one of its '|'-separated parts
//                       ("first step", "grid": those parts)
//     --chainlet-only   chainlet's side only (no first step, no grid), LibTorch's times null: the AVX2 build's column of
//                       bench/compare.sh, whose rows are set against the native build's chainlet
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numbers>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "fma_peak.hpp"

using namespace chainlet;

namespace {

using TinyMLP = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;
using WideMLP = Chain<Input<2>, Dense<64, Tanh>, Dense<64, Tanh>, Dense<2>>;
using LeNet5 = Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2, 2>, Conv<5, 5, 16, ReLU>, MaxPool<2, 2>, Flatten,
                     Dense<120, ReLU>, Dense<84, ReLU>, Dense<10>>;

// The layer kinds of issue 13: a GRU over 50 steps of 4 features (its last hidden state into a Dense
// head) and a Conv1D net over 64 steps of 4 channels (channels-last; PyTorch's (C, L) on its side).
constexpr std::size_t gru_steps = 50, gru_features = 4, gru_hidden = 32, seq_batch = 256;
using GruNet = Chain<Input<gru_steps, gru_features>, GRU<gru_hidden>, Dense<1>>;
using Conv1dNet = Chain<Input<64, 4>, Conv1D<5, 16, ReLU, Padding::same>, MaxPool1D<2>, Conv1D<5, 32, ReLU, Padding::same>,
                        MaxPool1D<2>, GlobalAvgPool, Dense<4>>;
// The PINN of issue 14: 2-D Poisson, 1,024 interior points (u, grad u, Laplacian) and 256 boundary points (u).
using PinnNet = Chain<Input<2>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<1>>;
constexpr std::size_t pinn_interior = 1024, pinn_boundary = 256;

// Multiply-adds per sample. Training: forward + weight gradients + input gradients of every layer but
// the first; LeNet5's input gradient of conv2 is counted as the useful 8*8*16*150, not the padded
// correlation chainlet actually runs.
constexpr double tiny_train_macs = 1984, tiny_forward_macs = 704;
constexpr double wide_train_macs = 3 * (2 * 64 + 64 * 64 + 64 * 2) - 2 * 64;
constexpr double lenet_forward_macs = 24 * 24 * 6 * 25 + 8 * 8 * 16 * 150 + 256 * 120 + 120 * 84 + 84 * 10;
constexpr double lenet_train_macs = 2 * lenet_forward_macs + 8 * 8 * 16 * 150 + 256 * 120 + 120 * 84 + 84 * 10;

// GRU: per step the 3H gate rows against x_t (F) and h_{t-1} (H), then the head. Training adds the
// weight gradients (as many again) and the gradient reaching h_{t-1} (3H x H per step); no input gradient
// (the GRU is the first layer). The elementwise gate work is not counted.
constexpr double gru_forward_macs = double(gru_steps) * 3 * gru_hidden * (gru_features + gru_hidden) + gru_hidden;
constexpr double gru_train_macs = 2 * gru_forward_macs + double(gru_steps) * 3 * gru_hidden * gru_hidden;

// Conv1D net: useful taps only (those on the zero padding excluded). Output position l of a K-tap
// "same" kernel over L inputs reaches min(L, l + K - pad) - max(0, l - pad) real inputs.
constexpr double same_conv_taps(std::size_t L, std::size_t K) {
    const std::size_t pad = (K - 1) / 2;
    double taps = 0;
    for (std::size_t l = 0; l < L; ++l)
        for (std::size_t k = 0; k < K; ++k)
            if (l + k >= pad && l + k - pad < L) taps += 1;
    return taps;
}
constexpr double conv1d_c1 = same_conv_taps(64, 5) * 4 * 16, conv1d_c2 = same_conv_taps(32, 5) * 16 * 32,
                 conv1d_head = 32 * 4;
constexpr double conv1d_forward_macs = conv1d_c1 + conv1d_c2 + conv1d_head;
constexpr double conv1d_train_macs = 2 * conv1d_forward_macs + conv1d_c2 + conv1d_head;

// PINN step: the matrix products of the pass (C columns per point: value, 2 tangents, the Laplacian;
// 1 column at the boundary) and of its pullback (the weight gradient, and the input cotangent of every
// layer but the first). Activation jets are not counted.
double pinn_step_flops() {
    auto pass = [](double columns, double points) {
        double f = 0;
        for (std::size_t l = 0; l < PinnNet::num_layers; ++l)
            f += 2.0 * double(PinnNet::width[l] * PinnNet::width[l + 1]) * columns * points * (l == 0 ? 2 : 3);
        return f;
    };
    return pass(4, pinn_interior) + pass(1, pinn_boundary);
}

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
                    if (iters <= k) return t / static_cast<double>(k);  // long enough: a slow call is not run again
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
    bool float64 = false;  // float64 arithmetic: half the fp32 FMA peak
};

// One point of the inference latency grid: seconds per call at one batch size.
struct GridPoint {
    std::string model;
    std::size_t batch;
    int threads;
    double chainlet_s, libtorch_s;
};

// Seconds of the first call on fresh state (workspace / optimiser / model), and the median of the
// following calls, for one framework.
struct FirstStep {
    std::string workload, framework;
    int threads;
    double first_s, steady_s;
};

double time_once(const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return seconds_since(t0);
}

struct Side {
    std::function<void()> setup;  // untimed, before the warm-up
    std::function<void()> step;
};

// A time for the JSON: null where it was not measured.
std::string json_number(double x) {
    if (!std::isfinite(x)) return "null";
    std::ostringstream s;
    s << x;
    return s.str();
}

// --chainlet-only: the LibTorch side is not run, and its time is NaN (null in the JSON).
bool chainlet_only = false;

std::pair<double, double> alternate(int threads, Side& ours, Side& theirs, int rounds, double target) {
    torch::set_num_threads(threads);
    const bool both = !chainlet_only;
    ours.setup();
    if (both) theirs.setup();
    // One untimed call each first. The timer sizes its blocks on its first calls, and a one-time cost
    // there (lazy symbol binding, first-touch page faults: 25 ms and more was seen after the first-step
    // section) made a 0.3 µs call look like a 50 ms one, so the block shrank to 2 calls and timed the
    // cold-cache calls after the other side's block (4 µs) instead of the steady state.
    ours.step();
    if (both) theirs.step();
    Timer ta, tb;
    ta.run(ours.step, target / 2);  // warm-up, also sizes the blocks
    if (both) tb.run(theirs.step, target / 2);
    std::vector<double> a, b;
    for (int r = 0; r < rounds; ++r) {
        a.push_back(ta.run(ours.step, target));
        if (both) b.push_back(tb.run(theirs.step, target));
    }
    return {median(a), both ? median(b) : std::nan("")};
}

Row compare(const std::string& name, int threads, double flops, Side ours, Side theirs, int rounds, double target,
            bool float64 = false) {
    const auto [a, b] = alternate(threads, ours, theirs, rounds, target);
    Row row{name, threads, flops, a, b, float64};
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

torch::nn::Sequential torch_lenet5() {
    namespace nn = torch::nn;
    return nn::Sequential(nn::Conv2d(1, 6, 5), nn::ReLU(), nn::MaxPool2d(2), nn::Conv2d(6, 16, 5), nn::ReLU(),
                          nn::MaxPool2d(2), nn::Flatten(), nn::Linear(256, 120), nn::ReLU(), nn::Linear(120, 84),
                          nn::ReLU(), nn::Linear(84, 10));
}

// nn.GRU(4, 32, batch_first=True), its output at the last step into nn.Linear(32, 1).
struct TorchGru : torch::nn::Module {
    torch::nn::GRU gru{nullptr};
    torch::nn::Linear head{nullptr};
    TorchGru() {
        gru = register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(gru_features, gru_hidden).batch_first(true)));
        head = register_module("head", torch::nn::Linear(gru_hidden, 1));
    }
    torch::Tensor forward(const torch::Tensor& x) {
        return head->forward(std::get<0>(gru->forward(x)).select(1, static_cast<std::int64_t>(gru_steps) - 1));
    }
};

torch::nn::Sequential torch_conv1d_net() {
    namespace nn = torch::nn;
    return nn::Sequential(nn::Conv1d(nn::Conv1dOptions(4, 16, 5).padding(2)), nn::ReLU(), nn::MaxPool1d(2),
                          nn::Conv1d(nn::Conv1dOptions(16, 32, 5).padding(2)), nn::ReLU(), nn::MaxPool1d(2),
                          nn::AdaptiveAvgPool1d(1), nn::Flatten(), nn::Linear(32, 4));
}

torch::nn::Sequential torch_pinn_net() {
    namespace nn = torch::nn;
    return nn::Sequential(nn::Linear(2, 32), nn::Tanh(), nn::Linear(32, 32), nn::Tanh(), nn::Linear(32, 32), nn::Tanh(),
                          nn::Linear(32, 1));
}

// The Poisson problem's points: interior uniform in [0,1]^2 with f = 2 pi^2 sin(pi x) sin(pi y), boundary
// points spread over the four sides.
template <class T>
struct PinnPoints {
    std::vector<T> interior, boundary, f;
    PinnPoints() : interior(2 * pinn_interior), boundary(2 * pinn_boundary), f(pinn_interior) {
        Rng rng(1);
        for (auto& v : interior) v = static_cast<T>(rng.uniform());
        for (std::size_t s = 0; s < pinn_boundary; ++s) {
            const T r = static_cast<T>(rng.uniform());
            const int side = static_cast<int>(s % 4);
            boundary[2 * s] = side == 1 ? T(0) : side == 2 ? T(1) : r;
            boundary[2 * s + 1] = side == 0 ? T(0) : side == 3 ? T(1) : r;
        }
        const double pi = std::numbers::pi;
        for (std::size_t s = 0; s < pinn_interior; ++s)
            f[s] = static_cast<T>(2 * pi * pi * std::sin(pi * double(interior[2 * s])) * std::sin(pi * double(interior[2 * s + 1])));
    }
};

// One PINN Adam step in chainlet: u, grad u and the Laplacian at the interior points in one pass, the
// residual Lap u + f; u at the boundary; the parameter gradient of mean (Lap u + f)^2 + mean u^2; Adam.
template <class T>
struct ChainletPinnStep {
    struct MinusF {
        const T* f;
        T operator()(const T*, std::size_t s) const { return -f[s]; }
    };
    struct Zero {
        T operator()(const T*, std::size_t) const { return T(0); }
    };
    const PinnPoints<T>& pts;
    int threads;
    decltype(linear_residual<T>({}, {T(1)}, MinusF{nullptr})) interior_loss;
    decltype(linear_residual<T>({}, {}, Zero{}, T(1))) boundary_loss;
    DerivativeWorkspace<PinnNet, T> wi, wb;
    std::vector<T> p, g;
    Adam<T> opt;
    ChainletPinnStep(const PinnPoints<T>& points, int t)
        : pts(points), threads(t), interior_loss(linear_residual<T>({}, {T(1)}, MinusF{points.f.data()})),
          boundary_loss(linear_residual<T>({}, {}, Zero{}, T(1))),
          wi(DerivativeSpec::laplacian(2), pinn_interior, t), wb(DerivativeSpec::value(), pinn_boundary, t),
          p(PinnNet::num_params), g(PinnNet::num_params), opt(T(1e-3)) {
        init_params<PinnNet>(p, 1);
        opt.init(p.size());
    }
    void operator()() {
        std::fill(g.begin(), g.end(), T(0));
        wi.add_value_and_gradient(p.data(), g.data(), pts.interior.data(), pinn_interior, interior_loss, T(1), threads);
        wb.add_value_and_gradient(p.data(), g.data(), pts.boundary.data(), pinn_boundary, boundary_loss, T(1), threads);
        opt.step(std::span<T>(p), std::span<const T>(g));
    }
};

// The same step in LibTorch: the Laplacian by double backward (torch::autograd::grad with create_graph).
struct TorchPinnStep {
    torch::nn::Sequential net = torch_pinn_net();
    torch::Tensor xi, xb, f;
    std::optional<torch::optim::Adam> opt;
    template <class T>
    TorchPinnStep(const PinnPoints<T>& pts, torch::Dtype dtype) {
        net->to(dtype);
        const auto opts = torch::TensorOptions().dtype(dtype);
        xi = torch::from_blob(const_cast<T*>(pts.interior.data()), {long(pinn_interior), 2}, opts).clone().requires_grad_(true);
        xb = torch::from_blob(const_cast<T*>(pts.boundary.data()), {long(pinn_boundary), 2}, opts).clone();
        f = torch::from_blob(const_cast<T*>(pts.f.data()), {long(pinn_interior)}, opts).clone();
        opt.emplace(net->parameters(), torch::optim::AdamOptions(1e-3));
    }
    void operator()() {
        const auto u = net->forward(xi);
        const auto du = torch::autograd::grad({u.sum()}, {xi}, {}, true, true)[0];
        torch::Tensor lap;
        for (long i = 0; i < 2; ++i) {
            const auto d2 = torch::autograd::grad({du.select(1, i).sum()}, {xi}, {}, true, true)[0].select(1, i);
            lap = i == 0 ? d2 : lap + d2;
        }
        const auto loss = (lap + f).pow(2).mean() + net->forward(xb).pow(2).mean();
        opt->zero_grad();
        loss.backward();
        opt->step();
    }
};

// One Adam(1e-3) step on the whole batch x with squared error: chainlet (a fresh workspace and
// optimiser) against the LibTorch model (MSE on tx, ty) with a fresh optimiser.
template <class Net, class Model>
Row adam_mse_row(const std::string& name, int t, double flops, const std::vector<float>& x,
                 const std::vector<float>& y, std::vector<float>& p, std::vector<float>& g, Model& model,
                 const torch::Tensor& tx, const torch::Tensor& ty, int rounds, double target) {
    const std::size_t n = x.size() / Net::in_size;
    torch::optim::Adam topt(model->parameters(), torch::optim::AdamOptions(1e-3));
    Workspace<Net, float> ws;
    Adam opt(1e-3f);
    return compare(
        name, t, flops,
        {[&] { ws.reserve(n, t); opt.init(p.size()); },
         [&] {
             value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, t);
             opt.step(p, g);
         }},
        {[] {},
         [&] {
             topt.zero_grad();
             torch::mse_loss(model->forward(tx), ty).backward();
             topt.step();
         }},
        rounds, target);
}

// A training step on a batch (squared error, Adam(1e-3)) and inference on its first sample, chainlet
// against the LibTorch model make_model() returns, which reads tx (the batch, in its own layout) and ty.
template <class Net, class MakeModel>
void step_and_single_rows(std::vector<Row>& rows, const std::string& train_name, const std::string& infer_name,
                          double train_macs, double forward_macs, const std::vector<float>& x,
                          const std::vector<float>& y, const torch::Tensor& tx, const torch::Tensor& ty,
                          MakeModel make_model, const std::vector<int>& thread_counts, int rounds, double target) {
    const std::size_t n = x.size() / Net::in_size;
    const std::vector<float> one(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(Net::in_size));
    const auto tone = tx.slice(0, 0, 1).clone();
    std::vector<float> p(Net::num_params), g(Net::num_params), out(Net::out_size);
    init_params<Net>(p, 1);
    for (int t : thread_counts) {
        auto model = make_model();
        Workspace<Net, float> ws1;
        rows.push_back(adam_mse_row<Net>(train_name, t, 2.0 * train_macs * static_cast<double>(n), x, y, p, g, model, tx,
                                         ty, rounds, target));
        rows.push_back(compare(
            infer_name, t, 2.0 * forward_macs, {[&] { ws1.reserve(1, t); }, [&] { predict<Net>(ws1, p, one, out, t); }},
            {[] {},
             [&] {
                 torch::NoGradGuard no_grad;
                 auto r = model->forward(tone);
             }},
            rounds, target));
    }
}

// Median seconds of `rounds` calls of f after the first (which is excluded).
double steady_seconds(const std::function<void()>& f, int rounds) {
    std::vector<double> t{time_once(f)};
    if (t[0] < 0.05)  // one call when it is slow
        for (int r = 1; r < rounds; ++r) t.push_back(time_once(f));
    return median(t);
}

// The first-step cost of both sides: a fresh workspace and optimiser (chainlet) or a fresh optimiser
// and the first autograd pass (LibTorch), timed from before their creation to the end of the first
// call; then the median of the next calls for scale. Run first in the process, before any other row,
// so that LibTorch's one-time initialisation (thread pool, oneDNN/MKL primitives) lands in it, as it
// does at a program's start. Models and parameters are built untimed, on both sides.
std::vector<FirstStep> first_steps(int t, bool quick) {
    std::vector<FirstStep> out;
    const int rounds = quick ? 3 : 5;
    torch::set_num_threads(t);
    auto record = [&](const std::string& w, const std::string& fw, double first, const std::function<void()>& f) {
        out.push_back({w, fw, t, first, steady_seconds(f, rounds)});
        std::printf("first step: %-40s %-9s %3d  %10.3f ms (then %10.3f ms)\n", w.c_str(), fw.c_str(), t,
                    1e3 * out.back().first_s, 1e3 * out.back().steady_s);
        std::fflush(stdout);
    };
    {
        const std::size_t n = 10000;
        const auto x = normal(4 * n, 1), y = normal(4 * n, 2);
        std::vector<float> p(TinyMLP::num_params), g(TinyMLP::num_params);
        init_params<TinyMLP>(p, 1);
        const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {static_cast<long>(n), 4}).clone();
        const torch::Tensor ty = torch::from_blob(const_cast<float*>(y.data()), {static_cast<long>(n), 4}).clone();
        auto model = torch_tiny();
        std::optional<Workspace<TinyMLP, float>> ws;
        std::optional<Adam<float>> opt;
        std::optional<torch::optim::Adam> topt;
        auto ours = [&] {
            value_and_gradient<TinyMLP>(*ws, p, g, x, y, SquaredError{}, t);
            opt->step(p, g);
        };
        auto theirs = [&] {
            topt->zero_grad();
            torch::mse_loss(model->forward(tx), ty).backward();
            topt->step();
        };
        const std::string w = "tiny MLP train step, 10k samples";
        record(w, "libtorch", time_once([&] {
                   topt.emplace(model->parameters(), torch::optim::AdamOptions(1e-3));
                   theirs();
               }),
               theirs);
        record(w, "chainlet", time_once([&] {
                   ws.emplace(n, t);
                   opt.emplace(1e-3f);
                   opt->init(p.size());
                   ours();
               }),
               ours);
    }
    {
        std::vector<float> p(TinyMLP::num_params), out(4);
        init_params<TinyMLP>(p, 1);
        const auto x = normal(4, 3);
        auto model = torch_tiny();
        const torch::Tensor tx = torch::randn({1, 4});
        std::optional<Workspace<TinyMLP, float>> ws;
        auto ours = [&] { predict<TinyMLP>(*ws, p, x, out, t); };
        auto theirs = [&] {
            torch::NoGradGuard no_grad;
            auto r = model->forward(tx);
        };
        const std::string w = "tiny MLP forward, 1 sample";
        record(w, "libtorch", time_once(theirs), theirs);
        record(w, "chainlet", time_once([&] {
                   ws.emplace(1, 1);
                   ours();
               }),
               ours);
    }
    {
        const std::size_t batch = 2048, n_test = quick ? 2048 : 10000;
        const auto x = normal(batch * 784, 7), xt = normal(n_test * 784, 8);
        std::vector<std::int32_t> y(batch);
        for (std::size_t s = 0; s < batch; ++s) y[s] = static_cast<std::int32_t>(s % 10);
        const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {static_cast<long>(batch), 1, 28, 28}).clone();
        const torch::Tensor txt = torch::from_blob(const_cast<float*>(xt.data()), {static_cast<long>(n_test), 1, 28, 28}).clone();
        const torch::Tensor ty = torch::from_blob(y.data(), {static_cast<long>(batch)}, torch::kInt32).to(torch::kLong);
        std::vector<float> p(LeNet5::num_params), g(LeNet5::num_params), out(n_test * 10);
        init_params<LeNet5>(p, 1);
        auto model = torch_lenet5();
        std::optional<Workspace<LeNet5, float>> ws, pws;
        std::optional<Adam<float>> opt;
        std::optional<torch::optim::Adam> topt;
        auto ours = [&] {
            value_and_gradient<LeNet5>(*ws, p, g, x, y, SoftmaxCrossEntropy{}, t);
            opt->step(p, g);
        };
        auto theirs = [&] {
            topt->zero_grad();
            torch::nn::functional::cross_entropy(model->forward(tx), ty).backward();
            topt->step();
        };
        const std::string w = "LeNet5 train step, batch 2048";
        record(w, "libtorch", time_once([&] {
                   topt.emplace(model->parameters(), torch::optim::AdamOptions(3e-4));
                   theirs();
               }),
               theirs);
        record(w, "chainlet", time_once([&] {
                   ws.emplace(batch, t);
                   opt.emplace(3e-4f);
                   opt->init(p.size());
                   ours();
               }),
               ours);
        auto ours_infer = [&] { predict<LeNet5>(*pws, p, xt, out, t); };
        auto theirs_infer = [&] {
            torch::NoGradGuard no_grad;
            auto r = model->forward(txt);
        };
        const std::string wi = quick ? "LeNet5 inference, 2048 images" : "LeNet5 inference, 10k images";
        record(wi, "libtorch", time_once(theirs_infer), theirs_infer);
        record(wi, "chainlet", time_once([&] {
                   pws.emplace(n_test, t);
                   ours_infer();
               }),
               ours_infer);
    }
    return out;
}

// Inference latency at batch 1, 2, 4, ..., 2048 (quick: 1, 8, 64, 512, 2048), both sides alternating.
std::vector<GridPoint> latency_grid(int t, bool quick) {
    std::vector<std::size_t> batches;
    for (std::size_t b = 1; b <= 2048; b *= (quick ? 8 : 2)) batches.push_back(b);
    if (batches.back() != 2048) batches.push_back(2048);
    const int rounds = quick ? 3 : 5;
    const double target = quick ? 0.01 : 0.05;
    std::vector<GridPoint> out;
    auto point = [&](const std::string& model, std::size_t b, Side ours, Side theirs) {
        const auto [a, c] = alternate(t, ours, theirs, rounds, target);
        out.push_back({model, b, t, a, c});
        std::printf("grid: %-8s batch %5zu %3d  %12.3f us %12.3f us  %8.1fx\n", model.c_str(), b, t, 1e6 * a, 1e6 * c,
                    c / a);
        std::fflush(stdout);
    };
    std::vector<float> pt(TinyMLP::num_params), pl(LeNet5::num_params);
    init_params<TinyMLP>(pt, 1);
    init_params<LeNet5>(pl, 1);
    auto tiny = torch_tiny();
    auto lenet = torch_lenet5();
    for (std::size_t b : batches) {
        const auto x = normal(4 * b, 9);
        std::vector<float> out_b(4 * b);
        const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {static_cast<long>(b), 4}).clone();
        Workspace<TinyMLP, float> ws;
        point("tiny MLP", b, {[&] { ws.reserve(b, t); }, [&] { predict<TinyMLP>(ws, pt, x, out_b, t); }},
              {[] {}, [&] {
                   torch::NoGradGuard no_grad;
                   auto r = tiny->forward(tx);
               }});
    }
    for (std::size_t b : batches) {
        const auto x = normal(784 * b, 10);
        std::vector<float> out_b(10 * b);
        const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {static_cast<long>(b), 1, 28, 28}).clone();
        Workspace<LeNet5, float> ws;
        point("LeNet5", b, {[&] { ws.reserve(b, t); }, [&] { predict<LeNet5>(ws, pl, x, out_b, t); }},
              {[] {}, [&] {
                   torch::NoGradGuard no_grad;
                   auto r = lenet->forward(tx);
               }});
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    std::string json, only;
    int max_threads = default_threads(), only_threads = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick") quick = true;
        else if (a == "--json" && i + 1 < argc) json = argv[++i];
        else if (a == "--threads" && i + 1 < argc) max_threads = std::stoi(argv[++i]);
        else if (a == "--thread-count" && i + 1 < argc) only_threads = std::stoi(argv[++i]);
        else if (a == "--only" && i + 1 < argc) only = argv[++i];
        else if (a == "--chainlet-only") chainlet_only = true;
        else {
            std::fprintf(stderr, "usage: chainlet_compare [--quick] [--json FILE] [--threads T | --thread-count T] [--only S] "
                                 "[--chainlet-only]\n");
            return 2;
        }
    }
    if (max_threads < 1 || only_threads < 0) {
        std::fprintf(stderr, "chainlet_compare: thread counts must be at least 1\n");
        return 2;
    }
    const int rounds = quick ? 3 : 7;
    const double target = quick ? 0.05 : 0.2;
    torch::manual_seed(0);
    std::printf("%s\nlibtorch %s\n", build_report().c_str(), TORCH_VERSION);

    std::vector<int> thread_counts = {1};
    if (max_threads > 1) thread_counts.push_back(max_threads);
    if (only_threads > 0) thread_counts = {only_threads}, max_threads = only_threads;
    // --only S: the rows whose workload name contains S, or one of S's '|'-separated parts ("first step"
    // and "grid" name the other parts).
    auto wanted = [&](const std::string& name) {
        if (only.empty()) return true;
        for (std::size_t b = 0;;) {
            const std::size_t e = std::min(only.find('|', b), only.size());
            if (name.find(only.substr(b, e - b)) != std::string::npos) return true;
            if (e == only.size()) return false;
            b = e + 1;
        }
    };
    std::vector<FirstStep> firsts;
    if (wanted("first step") && !chainlet_only)
        for (int t : thread_counts)
            for (auto& f : first_steps(t, quick)) firsts.push_back(f);
    std::vector<std::pair<int, double>> peaks;
    for (int t : thread_counts) {
        const double peak = bench::fma_peak_gflops(t);
        peaks.emplace_back(t, peak);
        std::printf("fp32 FMA peak, %d thread(s): %.1f GFLOP/s\n", t, peak);
    }
    std::printf("%-46s %3s  %15s %15s  %9s\n", "workload", "thr", "chainlet", "libtorch", "ratio");

    std::vector<Row> rows;
    // 1. Tiny MLP, full-batch training step on 10,000 samples, Adam(1e-3).
    if (wanted("tiny MLP train step")) {
        const std::size_t n = 10000;
        const auto x = normal(4 * n, 1), y = normal(4 * n, 2);
        std::vector<float> p(TinyMLP::num_params), g(TinyMLP::num_params);
        init_params<TinyMLP>(p, 1);
        const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {static_cast<long>(n), 4}).clone();
        const torch::Tensor ty = torch::from_blob(const_cast<float*>(y.data()), {static_cast<long>(n), 4}).clone();
        for (int t : thread_counts) {
            auto model = torch_tiny();
            rows.push_back(adam_mse_row<TinyMLP>("tiny MLP train step, 10k samples", t, 2.0 * tiny_train_macs * n, x, y, p,
                                                 g, model, tx, ty, rounds, target));
        }
    }
    // 2. The same model, one sample: forward, and forward + pullback (gradient of a squared loss).
    if (wanted("tiny MLP forward")) {
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
        if (!wanted("wide MLP train step, batch " + std::to_string(n))) continue;
        const auto x = normal(2 * n, 5), y = normal(2 * n, 6);
        std::vector<float> p(WideMLP::num_params), g(WideMLP::num_params);
        init_params<WideMLP>(p, 1);
        const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {static_cast<long>(n), 2}).clone();
        const torch::Tensor ty = torch::from_blob(const_cast<float*>(y.data()), {static_cast<long>(n), 2}).clone();
        for (int t : thread_counts) {
            auto model = torch::nn::Sequential(torch::nn::Linear(2, 64), torch::nn::Tanh(), torch::nn::Linear(64, 64),
                                               torch::nn::Tanh(), torch::nn::Linear(64, 2));
            rows.push_back(adam_mse_row<WideMLP>("wide MLP train step, batch " + std::to_string(n), t,
                                                 2.0 * wide_train_macs * static_cast<double>(n), x, y, p, g, model, tx,
                                                 ty, rounds, target));
        }
    }
    // 4. LeNet5: one training epoch (batch 2048, Adam(3e-4), no shuffling on either side) and inference
    //    on 10,000 images (quick: 4096 and 2048). Random images: the cost does not depend on the pixel values.
    if (wanted("LeNet5")) {
        const std::size_t n = quick ? 4096 : 60000, batch = 2048, n_test = quick ? 2048 : 10000;
        const auto x = normal(n * 784, 7), xt = normal(n_test * 784, 8);
        std::vector<std::int32_t> y(n);
        for (std::size_t s = 0; s < n; ++s) y[s] = static_cast<std::int32_t>(s % 10);
        const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {static_cast<long>(n), 1, 28, 28}).clone();
        const torch::Tensor txt = torch::from_blob(const_cast<float*>(xt.data()), {static_cast<long>(n_test), 1, 28, 28}).clone();
        const torch::Tensor ty = torch::from_blob(y.data(), {static_cast<long>(n)}, torch::kInt32).to(torch::kLong);
        std::vector<float> p(LeNet5::num_params), out(n_test * 10);
        init_params<LeNet5>(p, 1);
        for (int t : thread_counts) {
            auto model = torch_lenet5();
            torch::optim::Adam topt(model->parameters(), torch::optim::AdamOptions(3e-4));
            Adam opt(3e-4f);
            Workspace<LeNet5, float> train_ws;
            std::vector<float> g(LeNet5::num_params);
            const std::string images = quick ? "4096 images" : "60k images";
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
                quick ? "LeNet5 inference, 2048 images" : "LeNet5 inference, 10k images", t, 2.0 * lenet_forward_macs * static_cast<double>(n_test),
                {[&] { ws.reserve(n_test, t); }, [&] { predict<LeNet5>(ws, p, xt, out, t); }},
                {[] {},
                 [&] {
                     torch::NoGradGuard no_grad;
                     auto r = model->forward(txt);
                 }},
                rounds, target));
        }
    }

    // 5. Issue 13's layer kinds: a GRU (train step on 256 sequences, inference on one) and a Conv1D net
    //    (the same), squared error and Adam(1e-3) on both sides.
    if (wanted("GRU")) {
        const auto x = normal(seq_batch * GruNet::in_size, 11), y = normal(seq_batch, 12);
        const auto tx = torch::from_blob(const_cast<float*>(x.data()), {long(seq_batch), long(gru_steps), long(gru_features)}).clone();
        const auto ty = torch::from_blob(const_cast<float*>(y.data()), {long(seq_batch), 1}).clone();
        step_and_single_rows<GruNet>(rows, "GRU train step, batch 256", "GRU inference, 1 sequence", gru_train_macs,
                                     gru_forward_macs, x, y, tx, ty, [] { return std::make_shared<TorchGru>(); },
                                     thread_counts, rounds, target);
    }
    if (wanted("Conv1D")) {
        const auto x = normal(seq_batch * Conv1dNet::in_size, 13), y = normal(seq_batch * 4, 14);
        // chainlet's sequences are (L, C), PyTorch's (C, L): the same numbers, transposed.
        const auto tx = torch::from_blob(const_cast<float*>(x.data()), {long(seq_batch), 64, 4}).permute({0, 2, 1}).contiguous();
        const auto ty = torch::from_blob(const_cast<float*>(y.data()), {long(seq_batch), 4}).clone();
        step_and_single_rows<Conv1dNet>(rows, "Conv1D net train step, batch 256", "Conv1D net inference, 1 sequence",
                                        conv1d_train_macs, conv1d_forward_macs, x, y, tx, ty, torch_conv1d_net,
                                        thread_counts, rounds, target);
    }
    // 6. Issue 14's PINN Adam step (2-D Poisson), float32 and float64.
    if (wanted("PINN")) {
        const PinnPoints<float> pts32;
        const PinnPoints<double> pts64;
        for (int t : thread_counts) {
            std::optional<ChainletPinnStep<float>> ours32;
            std::optional<ChainletPinnStep<double>> ours64;
            std::optional<TorchPinnStep> theirs32, theirs64;
            rows.push_back(compare("PINN Poisson Adam step, float32", t, pinn_step_flops(),
                                   {[&] { ours32.emplace(pts32, t); }, [&] { (*ours32)(); }},
                                   {[&] { theirs32.emplace(pts32, torch::kFloat32); }, [&] { (*theirs32)(); }},
                                   rounds, target));
            rows.push_back(compare("PINN Poisson Adam step, float64", t, pinn_step_flops(),
                                   {[&] { ours64.emplace(pts64, t); }, [&] { (*ours64)(); }},
                                   {[&] { theirs64.emplace(pts64, torch::kFloat64); }, [&] { (*theirs64)(); }},
                                   rounds, target, true));
        }
    }

    std::vector<GridPoint> grid;
    if (wanted("grid") && !chainlet_only)
        for (int t : thread_counts)
            for (auto& g : latency_grid(t, quick)) grid.push_back(g);

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
                << ", \"chainlet_seconds\": " << r.chainlet_s << ", \"libtorch_seconds\": " << json_number(r.libtorch_s)
                << ", \"flops\": " << r.flops << ", \"dtype\": \"" << (r.float64 ? "float64" : "float32") << "\"}"
                << (i + 1 < rows.size() ? ",\n" : "\n");
        }
        out << " ],\n \"grid\": [\n";
        for (std::size_t i = 0; i < grid.size(); ++i) {
            const GridPoint& r = grid[i];
            out << "  {\"model\": \"" << r.model << "\", \"batch\": " << r.batch << ", \"threads\": " << r.threads
                << ", \"chainlet_seconds\": " << r.chainlet_s << ", \"libtorch_seconds\": " << json_number(r.libtorch_s) << "}"
                << (i + 1 < grid.size() ? ",\n" : "\n");
        }
        out << " ],\n \"first_step\": [\n";
        for (std::size_t i = 0; i < firsts.size(); ++i) {
            const FirstStep& r = firsts[i];
            out << "  {\"workload\": \"" << r.workload << "\", \"framework\": \"" << r.framework
                << "\", \"threads\": " << r.threads << ", \"first_seconds\": " << r.first_s
                << ", \"steady_seconds\": " << r.steady_s << "}" << (i + 1 < firsts.size() ? ",\n" : "\n");
        }
        out << " ]\n}\n";
    }
    return 0;
}
