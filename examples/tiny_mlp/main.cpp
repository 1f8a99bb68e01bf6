// The SimpleChains.jl blog model: 4 -> 32 tanh -> 16 tanh -> 4, learning the exponential of a 2x2
// matrix (input: its 4 entries drawn from N(0, 1); target: the 4 entries of exp(A)), full-batch Adam.
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/checksum.hpp"
#include "common/args.hpp"
#include "common/matrix_exp.hpp"

using namespace chainlet;
using TinyMLP = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;

int main(int argc, char** argv) {
    CLI::App app{"The tiny MLP of the SimpleChains.jl blog (4 -> 32 tanh -> 16 tanh -> 4) learning the exponential "
                 "of a 2x2 matrix with full-batch Adam(1e-3).", "tiny_mlp"};
    examples::show_defaults(app);
    std::uint64_t steps = 10000, samples = 10000, seed = 1;
    int threads = 0;
    app.add_option("--steps", steps, "full-batch Adam(1e-3) steps")->check(examples::whole(1, 100000000));
    app.add_option("--threads", threads, "OpenMP threads, 0 = all cores")->check(examples::whole(0, 1024));
    app.add_option("--samples", samples, "training and test samples each")->check(examples::whole(1, 100000000));
    app.add_option("--seed", seed, "seed of the data and the initial parameters")->check(examples::whole(0, UINT64_MAX));
    if (const int status = examples::parse(app, argc, argv); status >= 0) return status;

    std::printf("%s\n", build_report().c_str());
    Rng rng(seed);
    std::vector<float> x, y, xt, yt;
    examples::make_matrix_exp_data(samples, rng, x, y);
    examples::make_matrix_exp_data(samples, rng, xt, yt);

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
