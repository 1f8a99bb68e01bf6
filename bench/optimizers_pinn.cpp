// Time to a target loss on the PINN of examples/pinn: L-BFGS (history 50, as the example) and Newton-CG
// from the same parameters, on Poisson (-Lap u = f on the unit square) or the heat equation, the
// 2-32-32-32-1 tanh MLP, float64. The derivative passes give no exact H v for a residual loss, so
// Newton-CG runs on two stand-ins: the Gauss-Newton product (examples/pinn/pinn.hpp,
// Problem::gauss_newton_product: J' J v, positive semi-definite) and central differences of the exact
// gradient, H v ~ (g(p + h v) - g(p - h v)) / 2h with h = 1e-5 (1 + |p|) / |v|. Both start after --adam
// Adam steps (the example's recipe, shortened); the table gives, for each target (a fraction of the loss
// at the start), the wall time and iterations at which each first reached it (docs/optimizers.md), and
// each run's relative L2 error on the example's grid at the end.
//
//   build/bench/chainlet_optimizers_pinn [--problem poisson|heat] [--adam N] [--points N] [--seconds S]
//                                        [--threads T]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "chainlet/optim/newton_cg.hpp"
#include "pinn/pinn.hpp"
#include "time_to_target.hpp"

using bench::reached;
using bench::Trace;
using Net = pinn::Net;

int main(int argc, char** argv) {
    std::string problem_name = "poisson";
    std::size_t adam_steps = 1000, points = 1024;
    double budget = 20;
    int threads = 1;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 == argc) {
            std::fprintf(stderr, "%s: %s needs a value\n", argv[0], argv[i]);
            return 2;
        }
        if (!std::strcmp(argv[i], "--problem")) problem_name = argv[i + 1];
        else if (!std::strcmp(argv[i], "--adam")) adam_steps = std::strtoul(argv[i + 1], nullptr, 10);
        else if (!std::strcmp(argv[i], "--points")) points = std::strtoul(argv[i + 1], nullptr, 10);
        else if (!std::strcmp(argv[i], "--seconds")) budget = std::strtod(argv[i + 1], nullptr);
        else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--problem poisson|heat] [--adam N] [--points N] [--seconds S] [--threads T]\n",
                         argv[0]);
            return 2;
        }
    }
    if ((problem_name != "poisson" && problem_name != "heat") || points < 16 || threads < 1 || !(budget > 0)) {
        std::fprintf(stderr, "%s: --problem is poisson or heat, --points >= 16, --threads >= 1, --seconds > 0\n", argv[0]);
        return 2;
    }
    const bool heat = problem_name == "heat";
    using T = double;
    pinn::Problem<Net, T> problem(heat, 1, points, 1, threads);
    problem.boundary_weight = heat ? 1 : 100;  // the example's weights
    std::vector<T> p0(Net::num_params), g(Net::num_params);
    chainlet::init_params<Net>(p0, 1);
    auto f = [&](std::span<const T> at, std::span<T> grad) { return static_cast<double>(problem.loss_and_gradient(at, grad)); };
    {  // the example's Adam phase: learning rate 2e-3 decayed geometrically to 2e-4
        chainlet::Adam<T> opt(2e-3);
        opt.init(p0.size());
        for (std::size_t it = 1; it <= adam_steps; ++it) {
            opt.set_learning_rate(2e-3 * std::pow(0.1, static_cast<double>(it - 1) / static_cast<double>(adam_steps)));
            f(p0, g);
            opt.step(std::span<T>(p0), std::span<const T>(g));
        }
    }
    const double initial = f(p0, g);
    std::printf("pinn %s, MLP 2-32-32-32-1 tanh (%zu parameters), %zu interior + %zu boundary points, float64, %d "
                "thread(s), after %zu Adam steps: loss %.4e, rel_l2_error %.3e; %.0f s per optimiser\n",
                problem_name.c_str(), Net::num_params, problem.ni, problem.nb, threads, adam_steps, initial,
                pinn::grid_error<Net>(heat, 1, p0, nullptr), budget);

    // H v by central differences of the exact gradient
    std::vector<T> shifted(Net::num_params), g_plus(Net::num_params), g_minus(Net::num_params);
    auto fd_hessian = [&](std::span<const T> at, std::span<const T> v, std::span<T> out) {
        const double h = pinn::difference_step(at, v);
        if (h == 0) {
            std::ranges::fill(out, T(0));
            return;
        }
        for (std::size_t j = 0; j < at.size(); ++j) shifted[j] = at[j] + h * v[j];
        f(shifted, g_plus);
        for (std::size_t j = 0; j < at.size(); ++j) shifted[j] = at[j] - h * v[j];
        f(shifted, g_minus);
        for (std::size_t j = 0; j < at.size(); ++j) out[j] = (g_plus[j] - g_minus[j]) / (2 * h);
    };
    auto gauss_newton = [&](std::span<const T> at, std::span<const T> v, std::span<T> out) {
        problem.gauss_newton_product(at, v, out);
    };

    Trace lbfgs, newton_gn, newton_fd;
    chainlet::MinimizeResult rl, rg, rf;
    std::vector<T> pl = p0, pg = p0, pf = p0;
    {
        chainlet::LBFGS<T> opt({.history = 50, .max_iterations = 0, .gradient_tolerance = 0});
        lbfgs.start = Trace::clock::now();
        rl = opt.minimize(pl, f, [&](const chainlet::MinimizeIteration& it) { return lbfgs.record(it.iteration, it.loss, budget); });
    }
    {
        chainlet::NewtonCG<T> opt({.max_iterations = 0, .max_cg = 50, .gradient_tolerance = 0});
        newton_gn.start = Trace::clock::now();
        rg = opt.minimize(pg, f, gauss_newton,
                          [&](const chainlet::MinimizeIteration& it) { return newton_gn.record(it.iteration, it.loss, budget); });
    }
    {
        chainlet::NewtonCG<T> opt({.max_iterations = 0, .max_cg = 50, .gradient_tolerance = 0});
        newton_fd.start = Trace::clock::now();
        rf = opt.minimize(pf, f, fd_hessian,
                          [&](const chainlet::MinimizeIteration& it) { return newton_fd.record(it.iteration, it.loss, budget); });
    }
    std::printf("| loss / start | L-BFGS (history 50) | Newton-CG, Gauss-Newton J'J v | Newton-CG, differenced H v |\n"
                "|---|---|---|---|\n");
    for (double fraction : {1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5})
        std::printf("| %.0e | %s | %s | %s |\n", fraction, reached(lbfgs, fraction * initial).c_str(),
                    reached(newton_gn, fraction * initial).c_str(), reached(newton_fd, fraction * initial).c_str());
    auto summary = [&](const char* name, const Trace& t, const chainlet::MinimizeResult& r, const std::vector<T>& p) {
        std::printf("%s: loss / start %.3e, rel_l2_error %.3e, %zu iterations, %zu evaluations, %zu H v, %s\n", name,
                    t.last_loss(initial) / initial, pinn::grid_error<Net>(heat, 1, p, nullptr), r.iterations,
                    r.evaluations, r.hessian_products, to_string(r.stop));
    };
    summary("L-BFGS", lbfgs, rl, pl);
    summary("Newton-CG (Gauss-Newton)", newton_gn, rg, pg);
    summary("Newton-CG (differenced H v)", newton_fd, rf, pf);
    return 0;
}
