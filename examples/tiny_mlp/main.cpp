// The SimpleChains.jl blog model: 4 -> 32 tanh -> 16 tanh -> 4, learning the exponential of a 2x2
// matrix (input: its 4 entries drawn from N(0, 1); target: the 4 entries of exp(A)), full-batch Adam.
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/checksum.hpp"
#include "common/args.hpp"

using namespace chainlet;
using TinyMLP = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;

namespace {

// exp(A) for A = [a b; c d] in closed form: with s = (a + d) / 2 and B = A - s I, B^2 = q I where
// q = ((a - d) / 2)^2 + b c, so exp(A) = e^s (C I + S B) with C = cosh(sqrt q), S = sinh(sqrt q) / sqrt q
// (cos and sin of sqrt(-q) when q < 0).
void expm2(const float* m, float* out) {
    const double a = m[0], b = m[1], c = m[2], d = m[3];
    const double s = (a + d) / 2, q = (a - d) * (a - d) / 4 + b * c;
    double C = 1, S = 1;
    if (q > 1e-12) {
        const double r = std::sqrt(q);
        C = std::cosh(r);
        S = std::sinh(r) / r;
    } else if (q < -1e-12) {
        const double r = std::sqrt(-q);
        C = std::cos(r);
        S = std::sin(r) / r;
    }
    const double e = std::exp(s);
    out[0] = static_cast<float>(e * (C + S * (a - s)));
    out[1] = static_cast<float>(e * S * b);
    out[2] = static_cast<float>(e * S * c);
    out[3] = static_cast<float>(e * (C + S * (d - s)));
}

void make_data(std::size_t n, Rng& rng, std::vector<float>& x, std::vector<float>& y) {
    x.resize(4 * n);
    y.resize(4 * n);
    for (auto& v : x) v = static_cast<float>(rng.normal());
    for (std::size_t s = 0; s < n; ++s) expm2(&x[4 * s], &y[4 * s]);
}

}  // namespace

int main(int argc, char** argv) {
    examples::Args args(argc, argv,
                        "usage: tiny_mlp [--steps N] [--threads T] [--samples N] [--seed S]\n"
                        "  --steps    full-batch Adam(1e-3) steps (default 10000)\n"
                        "  --threads  OpenMP threads, 0 = all cores (default 0)\n"
                        "  --samples  training and test samples each (default 10000)\n"
                        "  --seed     seed of the data and the initial parameters (default 1)\n");
    const auto steps = args.integer("steps", 10000, 1, 100000000);
    const int threads = static_cast<int>(args.integer("threads", 0, 0, 1024));
    const auto samples = args.integer("samples", 10000, 1, 100000000);
    const auto seed = args.integer("seed", 1, 0, UINT64_MAX);
    args.finish();

    std::printf("%s\n", build_report().c_str());
    Rng rng(seed);
    std::vector<float> x, y, xt, yt;
    make_data(samples, rng, x, y);
    make_data(samples, rng, xt, yt);

    std::vector<float> p(TinyMLP::num_params), g(TinyMLP::num_params);
    init_params<TinyMLP>(p, seed);
    const float initial = value_and_gradient<TinyMLP>(p, g, x, y, SquaredError{}, threads);

    Adam opt(1e-3f);
    FitOptions o;
    o.epochs = steps;  // one full-batch step per epoch
    o.threads = threads;
    const std::size_t every = std::max<std::size_t>(1, steps / 10);
    o.on_epoch = [&](const EpochInfo& e) {
        if (e.epoch % every == 0 || e.epoch == e.epochs)
            std::printf("step %zu/%zu  loss %.6g\n", e.epoch, e.epochs, e.loss), std::fflush(stdout);
    };
    const FitResult r = fit<TinyMLP>(p, SquaredError{}, x, y, opt, o);

    const float train = value_and_gradient<TinyMLP>(p, g, x, y, SquaredError{}, threads);
    const float test = value_and_gradient<TinyMLP>(p, g, xt, yt, SquaredError{}, threads);
    std::printf("initial_loss=%.6g train_loss=%.6g test_loss=%.6g us_per_step=%.2f checksum=%016" PRIx64 "\n", initial,
                train, test, 1e6 * r.seconds / static_cast<double>(r.steps),
                checksum(std::span<const float>(p)));
    return 0;
}
