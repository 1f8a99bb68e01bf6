// Time to a target loss: full-batch Adam, L-BFGS (chainlet/optim/lbfgs.hpp) and Newton-CG on the exact
// H v (chainlet/optim/newton_cg.hpp, derivatives/hvp.hpp), from the same initial parameters, on the tiny
// MLP of the SimpleChains blog (4 -> 32 tanh -> 16 tanh -> 4, the exponential of a 2x2 matrix, float64).
// Every optimiser runs until its time budget; the table gives, for each target (a fraction of the
// initial loss), the wall time and iterations at which each first reached it (docs/optimizers.md).
//
//   build/bench/chainlet_optimizers [--samples N] [--seconds S] [--threads T]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/hvp.hpp"
#include "chainlet/optim/lbfgs.hpp"
#include "chainlet/optim/newton_cg.hpp"
#include "common/matrix_exp.hpp"
#include "time_to_target.hpp"

using namespace chainlet;
using TinyMLP = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;

using bench::reached;
using bench::Trace;

int main(int argc, char** argv) {
    std::size_t n = 10000;
    double budget = 10;
    int threads = 1;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 == argc) {
            std::fprintf(stderr, "%s: %s needs a value\n", argv[0], argv[i]);
            return 2;
        }
        if (!std::strcmp(argv[i], "--samples")) n = std::strtoul(argv[i + 1], nullptr, 10);
        else if (!std::strcmp(argv[i], "--seconds")) budget = std::strtod(argv[i + 1], nullptr);
        else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--samples N] [--seconds S] [--threads T]\n", argv[0]);
            return 2;
        }
    }
    Rng rng(1);
    std::vector<float> xf, yf;
    examples::make_matrix_exp_data(n, rng, xf, yf);
    const std::vector<double> x(xf.begin(), xf.end()), y(yf.begin(), yf.end());
    std::vector<double> p0(TinyMLP::num_params), g(TinyMLP::num_params);
    init_params<TinyMLP>(p0, 1);
    HessianVectorWorkspace<TinyMLP, double> hws(n, threads);
    Workspace<TinyMLP, double> ws(n, threads);
    auto f = [&](std::span<const double> at, std::span<double> grad) {
        return static_cast<double>(value_and_gradient<TinyMLP>(ws, at, grad, x, y, SquaredError{}, threads));
    };
    auto hv = [&](std::span<const double> at, std::span<const double> v, std::span<double> out) {
        hws.hvp(at.data(), v.data(), nullptr, out.data(), x.data(), y.data(), n, SquaredError{}, threads);
    };
    const double initial = f(p0, g);
    std::printf("tiny MLP 4-32-16-4 tanh, %zu samples, float64, %d thread(s), %.0f s per optimiser; initial loss %.4e\n", n,
                threads, budget, initial);

    Trace adam, lbfgs, newton;
    {
        std::vector<double> p = p0;
        Adam<double> opt(1e-3);
        adam.start = Trace::clock::now();
        for (std::size_t k = 1;; ++k) {
            const double l = f(p, g);
            opt.step(std::span<double>(p), std::span<const double>(g));
            if (adam.record(k, l, budget)) break;
        }
    }
    MinimizeResult rl, rn;
    {
        std::vector<double> p = p0;
        LBFGS<double> opt({.history = 20, .max_iterations = 0, .gradient_tolerance = 0});
        lbfgs.start = Trace::clock::now();
        rl = opt.minimize(p, f, [&](const MinimizeIteration& it) { return lbfgs.record(it.iteration, it.loss, budget); });
    }
    {
        std::vector<double> p = p0;
        NewtonCG<double> opt({.max_iterations = 0, .max_cg = 50, .gradient_tolerance = 0});
        newton.start = Trace::clock::now();
        rn = opt.minimize(p, f, hv, [&](const MinimizeIteration& it) { return newton.record(it.iteration, it.loss, budget); });
    }
    std::printf("| loss / initial | Adam(1e-3) | L-BFGS (history 20) | Newton-CG (CG <= 50) |\n|---|---|---|---|\n");
    for (double fraction : {1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4})
        std::printf("| %.0e | %s | %s | %s |\n", fraction, reached(adam, fraction * initial).c_str(),
                    reached(lbfgs, fraction * initial).c_str(), reached(newton, fraction * initial).c_str());
    std::printf("final loss / initial: Adam %.3e (%zu steps), L-BFGS %.3e (%zu iterations, %zu evaluations, %s), "
                "Newton-CG %.3e (%zu iterations, %zu evaluations, %zu H v, %s)\n",
                adam.last_loss(initial) / initial, adam.iteration.back(), lbfgs.last_loss(initial) / initial, rl.iterations,
                rl.evaluations, to_string(rl.stop), newton.last_loss(initial) / initial, rn.iterations, rn.evaluations,
                rn.hessian_products, to_string(rn.stop));
    return 0;
}
