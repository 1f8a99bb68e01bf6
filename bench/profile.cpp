// Per-layer profile of the benchmark workloads: where the time of a training step (or an inference
// pass) goes, layer by layer, with each part's FLOPs, GFLOP/s and % of the fp32 FMA peak measured in
// the same run.
//
//   chainlet_profile [--quick] [--threads T]
//
// Workloads (those of bench/compare.cpp): the tiny MLP 4-32-16-4 full-batch Adam step on 10,000
// samples; LeNet5 training steps of batch 2048 (an epoch is 60,000 / 2048 of them) and inference on
// 10,000 images; the tiny MLP's one-sample forward + pullback.
//
// The instrumented step does on one thread what Workspace::value_and_gradient does per chunk (gather
// and transpose the inputs, every layer's forward, the loss, every layer's pullback, the partial
// gradients and their sum) with a clock read around each part; it sums each part over the chunks of a
// step, over many steps, and reports medians over rounds. The "whole step" rows time the library's
// own calls (not instrumented) on 1 and T threads, so the sum of the parts can be checked against them.
//
// FLOPs count useful multiply-adds x 2: a layer's forward, its weight gradient, and its input
// gradient (except for the first layer, which needs none); element-wise work (activations, loss,
// pooling, transposes, optimiser) counts 0 FLOPs and shows as time only.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "fma_peak.hpp"

using namespace chainlet;

namespace {

using TinyMLP = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;
using LeNet5 = Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2, 2>, Conv<5, 5, 16, ReLU>, MaxPool<2, 2>, Flatten,
                     Dense<120, ReLU>, Dense<84, ReLU>, Dense<10>>;
const std::vector<std::string> tiny_names = {"Dense<32, tanh>", "Dense<16, tanh>", "Dense<4>"};
const std::vector<std::string> lenet_names = {"Conv<5,5,6, relu>", "MaxPool<2>",       "Conv<5,5,16, relu>",
                                              "MaxPool<2>",        "Flatten",          "Dense<120, relu>",
                                              "Dense<84, relu>",   "Dense<10>"};

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

std::vector<float> normal(std::size_t n, std::uint64_t seed) {
    Rng r(seed);
    std::vector<float> v(n);
    for (auto& e : v) e = static_cast<float>(r.normal());
    return v;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Multiply-adds per sample of a bound layer's forward (its weight gradient has as many, and so has its
// input gradient, the transposed map): a convolution's kernel applied at every output pixel, a dense
// layer's weights once; 0 for layers without weights.
template <class L>
constexpr double forward_macs() {
    if constexpr (requires { L::OH; L::OW; L::num_weights; }) return double(L::num_weights) * double(L::OH * L::OW);
    else if constexpr (requires { L::num_weights; }) return double(L::num_weights);
    else return 0;
}

// Per-part times of one step, summed over its chunks.
struct Parts {
    std::vector<double> forward, pullback;
    double gather = 0, loss = 0, partials = 0, scatter = 0, optimiser = 0;
    explicit Parts(std::size_t layers) : forward(layers, 0.0), pullback(layers, 0.0) {}
    Parts& operator+=(const Parts& o) {
        for (std::size_t i = 0; i < forward.size(); ++i) forward[i] += o.forward[i], pullback[i] += o.pullback[i];
        gather += o.gather, loss += o.loss, partials += o.partials, scatter += o.scatter, optimiser += o.optimiser;
        return *this;
    }
};

// The chunked step of Workspace::value_and_gradient (or predict, if `train` is false) on one thread,
// with a clock around every part.
template <class Net, class Loss>
class Instrumented {
public:
    using WS = Workspace<Net, float>;
    using target_t = typename Loss::template target<float>;

    Instrumented(std::size_t n) : n_(n), partial_(Net::num_params) {
        b_.reserve(std::min(n, WS::chunk));
        targets_.resize(Loss::targets_per_sample(Net::out_size) * WS::chunk);
        out_.resize(n * Net::out_size);
    }

    // One training step: gradient into g (the mean over the n samples), then opt.step.
    template <class Opt>
    void train(const float* p, float* g, const float* x, const target_t* y, Opt& opt, std::span<float> ps, Parts& t) {
        const std::size_t chunks = WS::num_chunks(n_), per = WS::chunks_per_group(n_), groups = WS::num_groups(n_);
        const std::size_t size = WS::chunk_size(n_);
        const std::size_t tps = Loss::targets_per_sample(Net::out_size);
        const float scale = 1.0f / static_cast<float>(n_);
        // As Workspace on one thread: g zeroed, then each group's gradient summed into the thread's one
        // partial (written by the group's first chunk, added to by the others) and added into g.
        auto t0 = clock_type::now();
        std::fill_n(g, Net::num_params, 0.0f);
        t.partials += since(t0);
        for (std::size_t i = 0; i < groups; ++i) {
            float* gi = groups == 1 ? g : partial_.data();
            for (std::size_t c = i * per; c < std::min(chunks, (i + 1) * per); ++c) {
                const std::size_t s0 = c * size, m = std::min(size, n_ - s0);
                t0 = clock_type::now();
                InputRows<float>{x}.gather(Net::in_size, s0, nullptr, m, b_.x);
                kernels::gather_transpose(y + s0 * tps, tps, nullptr, m, targets_.data());
                t.gather += since(t0);
                forward_layers(p, m, t);
                t0 = clock_type::now();
                sink_ += Loss::template value_and_gradient<float>(b_.y, targets_.data(), b_.dy,
                                                                   Net::out_size, m, scale);
                t.loss += since(t0);
                if (groups > 1 && c == i * per) pullback_layers<false>(p, gi, m, t);
                else pullback_layers<true>(p, gi, m, t);
            }
            t0 = clock_type::now();
            if (groups > 1) kernels::add_to(g, gi, Net::num_params);
            t.partials += since(t0);
        }
        t0 = clock_type::now();
        opt.step(ps, std::span<const float>(g, Net::num_params));
        t.optimiser += since(t0);
    }

    // Inference: outputs (sample-major) into an internal buffer.
    void infer(const float* p, const float* x, Parts& t) {
        const std::size_t size = WS::chunk_size(n_);
        for (std::size_t c = 0; c < WS::num_chunks(n_); ++c) {
            const std::size_t s0 = c * size, m = std::min(size, n_ - s0);
            auto t0 = clock_type::now();
            InputRows<float>{x}.gather(Net::in_size, s0, nullptr, m, b_.x);
            t.gather += since(t0);
            forward_layers(p, m, t);
            t0 = clock_type::now();
            kernels::scatter_transpose(b_.y, Net::out_size, m, out_.data() + s0 * Net::out_size);
            t.scatter += since(t0);
        }
    }

private:
    void forward_layers(const float* p, std::size_t m, Parts& t) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (([&] {
                 const auto t0 = clock_type::now();
                 detail::layer_forward<typename Net::template layer<I>>(
                     p + Net::param_offset[I], Net::template input<I>(static_cast<const float*>(b_.x), b_.saved, m),
                     Net::template output<I>(b_.y, b_.saved, m), b_.saved + Net::saved_offset[I] * m, m, Pass{});
                 t.forward[I] += since(t0);
             }()),
             ...);
        }(std::make_index_sequence<Net::num_layers>{});
    }
    // As detail::Sequence::pullback (chain.hpp), timed per layer: the first layer computes no dx;
    // accumulate false writes g (pullback_assign), as a group's first chunk does. A layer whose pullback
    // the previous layer does (Sequence::pulls_back_next) takes no time of its own.
    template <bool accumulate>
    void pullback_layers(const float* p, float* g, std::size_t m, Parts& t) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (([&] {
                 constexpr std::size_t L = Net::num_layers - 1 - I;
                 const auto t0 = clock_type::now();
                 Net::template pullback_layer<L, accumulate>(p, g, static_cast<const float*>(b_.x), b_.y, b_.saved,
                                                             b_.scratch, b_.dy, static_cast<float*>(nullptr), m);
                 t.pullback[L] += since(t0);
             }()),
             ...);
        }(std::make_index_sequence<Net::num_layers>{});
    }

    std::size_t n_;
    detail::ChainBuffers<Net, float> b_;
    std::vector<target_t> targets_;
    std::vector<float> partial_, out_;
    float sink_ = 0;
};

// Medians over `rounds` of the per-call mean of f(parts) over as many calls as fill `target` seconds.
template <class F>
Parts measure(std::size_t layers, int rounds, double target, F&& f) {
    std::size_t calls = 1;
    {
        Parts warm(layers);
        const auto t0 = clock_type::now();
        f(warm);
        const double t = since(t0);
        calls = std::max<std::size_t>(1, static_cast<std::size_t>(target / std::max(t, 1e-9)));
    }
    std::vector<Parts> per_round;
    for (int r = 0; r < rounds; ++r) {
        Parts sum(layers);
        for (std::size_t c = 0; c < calls; ++c) f(sum);
        per_round.push_back(sum);
    }
    Parts med(layers);
    auto pick = [&](auto get) {
        std::vector<double> v;
        for (auto& pr : per_round) v.push_back(get(pr) / static_cast<double>(calls));
        return median(v);
    };
    for (std::size_t i = 0; i < layers; ++i) {
        med.forward[i] = pick([&](Parts& q) { return q.forward[i]; });
        med.pullback[i] = pick([&](Parts& q) { return q.pullback[i]; });
    }
    med.gather = pick([](Parts& q) { return q.gather; });
    med.loss = pick([](Parts& q) { return q.loss; });
    med.partials = pick([](Parts& q) { return q.partials; });
    med.scatter = pick([](Parts& q) { return q.scatter; });
    med.optimiser = pick([](Parts& q) { return q.optimiser; });
    return med;
}

// Median time per call of f over `rounds` blocks of calls filling `target` seconds each.
double time_call(const std::function<void()>& f, int rounds, double target) {
    f();
    std::size_t calls = 1;
    for (;;) {
        const auto t0 = clock_type::now();
        for (std::size_t i = 0; i < calls; ++i) f();
        const double t = since(t0);
        if (t > target / 4 || calls > (1u << 26)) {
            calls = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(calls) * target / t));
            break;
        }
        calls *= 4;
    }
    std::vector<double> v;
    for (int r = 0; r < rounds; ++r) {
        const auto t0 = clock_type::now();
        for (std::size_t i = 0; i < calls; ++i) f();
        v.push_back(since(t0) / static_cast<double>(calls));
    }
    return median(v);
}

std::string time_text(double s) {
    char b[32];
    if (s >= 1e-3) std::snprintf(b, sizeof b, "%.3f ms", s * 1e3);
    else std::snprintf(b, sizeof b, "%.2f µs", s * 1e6);
    return b;
}

struct Table {
    double peak1, total;  // FMA peak (GFLOP/s, 1 thread) and the step time the shares refer to
    void header(const std::string& title) const {
        std::printf("\n### %s\n\n| part | time | share | MFLOP | GFLOP/s | of peak |\n|---|---:|---:|---:|---:|---:|\n",
                    title.c_str());
    }
    void row(const std::string& what, double s, double flops, double peak = 0) const {
        if (peak == 0) peak = peak1;
        std::printf("| %s | %s | %.1f %% |", what.c_str(), time_text(s).c_str(), 100 * s / total);
        if (flops > 0)
            std::printf(" %.2f | %.1f | %.0f %% |\n", flops / 1e6, flops / s / 1e9, 100 * flops / s / 1e9 / peak);
        else std::printf(" – | – | – |\n");
    }
};

double sum_parts(const Parts& t) {
    double s = t.gather + t.loss + t.partials + t.scatter + t.optimiser;
    for (std::size_t i = 0; i < t.forward.size(); ++i) s += t.forward[i] + t.pullback[i];
    return s;
}

// Per layer: whether its pullback also does the next layer's (chain.hpp, Sequence::pulls_back_next).
template <class Net>
std::vector<bool> pulls_back_next() {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return std::vector<bool>{Net::template pulls_back_next<I, float>()...};
    }(std::make_index_sequence<Net::num_layers>{});
}

template <class Net>
std::vector<std::pair<double, double>> layer_flops(std::size_t n) {  // (forward, pullback) per layer
    std::vector<std::pair<double, double>> f;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((f.emplace_back(2.0 * forward_macs<typename Net::template layer<I>>() * double(n),
                         2.0 * forward_macs<typename Net::template layer<I>>() * double(n) * (I > 0 ? 2.0 : 1.0))),
         ...);
    }(std::make_index_sequence<Net::num_layers>{});
    return f;
}

// The training profile of Net on batches of n samples, and the library's own step on 1..T threads.
template <class Net, class Loss>
void profile_training(const std::string& title, const std::vector<std::string>& names, std::size_t n,
                      const std::vector<float>& x, const std::vector<typename Loss::template target<float>>& y,
                      float lr, const std::vector<std::pair<int, double>>& peaks, int rounds, double target) {
    std::vector<float> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, 1);
    const std::vector<float> p0 = p;
    Adam opt(lr);
    opt.init(p.size());
    Instrumented<Net, Loss> ins(n);
    const Parts t = measure(Net::num_layers, rounds, target, [&](Parts& s) { ins.train(p.data(), g.data(), x.data(), y.data(), opt, p, s); });
    const auto flops = layer_flops<Net>(n);
    double total_flops = 0;
    for (auto [f, b] : flops) total_flops += f + b;

    // The library's step, not instrumented.
    std::vector<std::pair<int, double>> whole;
    for (auto [threads, peak] : peaks) {
        p = p0;
        Workspace<Net, float> ws(n, threads);
        Adam o2(lr);
        o2.init(p.size());
        whole.emplace_back(threads, time_call([&] {
                               value_and_gradient<Net>(ws, p, g, x, y, Loss{}, threads);
                               o2.step(p, g);
                           },
                                              rounds, target));
    }
    Table tab{peaks[0].second, sum_parts(t)};
    tab.header(title + " (chunk " + std::to_string(Workspace<Net, float>::chunk_size(n)) + ", instrumented on 1 thread)");
    tab.row("gather + transpose inputs and targets", t.gather, 0);
    for (std::size_t i = 0; i < names.size(); ++i) tab.row(names[i] + " forward", t.forward[i], flops[i].first);
    tab.row("loss value and gradient", t.loss, 0);
    const auto joint = pulls_back_next<Net>();
    for (std::size_t i = names.size(); i-- > 0;) {
        if (i > 0 && joint[i - 1])
            tab.row(names[i] + " pullback (in the row below)", t.pullback[i], flops[i].second);
        else if (joint[i])
            tab.row(names[i] + " + " + names[i + 1] + " pullback (one call)", t.pullback[i], flops[i].second);
        else
            tab.row(names[i] + " pullback", t.pullback[i], flops[i].second);
    }
    tab.row("partial gradients (zero, sum)", t.partials, 0);
    tab.row("Adam step", t.optimiser, 0);
    tab.row("**sum of the parts, 1 thread**", tab.total, total_flops);
    for (auto [threads, s] : whole) {
        double peak = 0;
        for (auto [th, pk] : peaks)
            if (th == threads) peak = pk;
        tab.row("**whole step (value_and_gradient + Adam), " + std::to_string(threads) + " thread(s)**", s, total_flops,
                peak);
    }
}

template <class Net>
void profile_inference(const std::string& title, const std::vector<std::string>& names, std::size_t n,
                       const std::vector<float>& x, const std::vector<std::pair<int, double>>& peaks, int rounds,
                       double target) {
    std::vector<float> p(Net::num_params), out(n * Net::out_size);
    init_params<Net>(p, 1);
    Instrumented<Net, SoftmaxCrossEntropy> ins(n);
    const Parts t = measure(Net::num_layers, rounds, target, [&](Parts& s) { ins.infer(p.data(), x.data(), s); });
    const auto flops = layer_flops<Net>(n);
    double total_flops = 0;
    for (auto [f, b] : flops) total_flops += f;
    std::vector<std::pair<int, double>> whole;
    for (auto [threads, peak] : peaks) {
        Workspace<Net, float> ws(n, threads);
        whole.emplace_back(threads, time_call([&] { predict<Net>(ws, p, x, out, threads); }, rounds, target));
    }
    Table tab{peaks[0].second, sum_parts(t)};
    tab.header(title + " (chunk " + std::to_string(Workspace<Net, float>::chunk_size(n)) + ", instrumented on 1 thread)");
    tab.row("gather + transpose inputs", t.gather, 0);
    for (std::size_t i = 0; i < names.size(); ++i) tab.row(names[i] + " forward", t.forward[i], flops[i].first);
    tab.row("transpose outputs", t.scatter, 0);
    tab.row("**sum of the parts, 1 thread**", tab.total, total_flops);
    for (auto [threads, s] : whole) {
        double peak = 0;
        for (auto [th, pk] : peaks)
            if (th == threads) peak = pk;
        tab.row("**whole pass (predict), " + std::to_string(threads) + " thread(s)**", s, total_flops, peak);
    }
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
            std::fprintf(stderr, "usage: chainlet_profile [--quick] [--threads T]\n");
            return 2;
        }
    }
    const int rounds = quick ? 3 : 7;
    const double target = quick ? 0.1 : 0.3;
    std::printf("%s\n", build_report().c_str());
    std::vector<std::pair<int, double>> peaks;
    std::vector<int> thread_counts = {1};
    if (max_threads > 1) thread_counts.push_back(max_threads);
    for (int t : thread_counts) {
        peaks.emplace_back(t, bench::fma_peak_gflops(t));
        std::printf("fp32 FMA peak, %d thread(s): %.1f GFLOP/s\n", t, peaks.back().second);
    }

    {
        const std::size_t n = 10000;
        const auto x = normal(4 * n, 1), y = normal(4 * n, 2);
        profile_training<TinyMLP, SquaredError>("tiny MLP 4-32-16-4, full-batch Adam step, 10,000 samples", tiny_names, n,
                                                x, y, 1e-3f, peaks, rounds, target);
    }
    {
        const std::size_t n = 2048;
        const auto x = normal(n * 784, 7);
        std::vector<std::int32_t> y(n);
        for (std::size_t s = 0; s < n; ++s) y[s] = static_cast<std::int32_t>(s % 10);
        profile_training<LeNet5, SoftmaxCrossEntropy>("LeNet5 training step, batch 2048 (an epoch: 29.3 of them)",
                                                      lenet_names, n, x, y, 3e-4f, peaks, rounds, target);
    }
    {
        const std::size_t n = 10000;
        const auto x = normal(n * 784, 8);
        profile_inference<LeNet5>("LeNet5 inference, 10,000 images", lenet_names, n, x, peaks, rounds, target);
    }
    {
        std::vector<float> p(TinyMLP::num_params), g(TinyMLP::num_params), out(4);
        init_params<TinyMLP>(p, 1);
        const auto x = normal(4, 3), y = normal(4, 4);
        Workspace<TinyMLP, float> ws(1, 1);
        const double fwd = time_call([&] { predict<TinyMLP>(ws, p, x, out, 1); }, rounds, target / 4);
        const double both = time_call([&] { value_and_gradient<TinyMLP>(ws, p, g, x, y, SquaredError{}, 1); }, rounds,
                                      target / 4);
        std::printf("\n### tiny MLP, one sample (library calls, 1 thread)\n\n| call | time |\n|---|---:|\n");
        std::printf("| forward (predict) | %.3f µs |\n| forward + pullback (value_and_gradient) | %.3f µs |\n", fwd * 1e6,
                    both * 1e6);
    }
    return 0;
}
