// A physics-informed network (PINN): an MLP u(x) trained so that it satisfies a PDE at collocation
// points, with u's input derivatives inside the loss (chainlet/derivatives/taylor.hpp).
//
//   --problem poisson: -Lap u = f on [0,1]^2, f = 2 pi^2 sin(pi x) sin(pi y), u = 0 on the boundary;
//                      exact u = sin(pi x) sin(pi y). Interior loss mean (Lap u + f)^2 (the Laplacian column).
//   --problem poisson-hf: the same with u = sin(6 pi x) sin(6 pi y), f = 72 pi^2 u: three periods each
//                      way, which a tanh MLP of this size fits badly (spectral bias). Trains the tanh MLP, a
//                      sine network of the same size (SIREN: sin(30 z) in the first layer, then sin(z)) and a
//                      tanh MLP after fixed random Fourier features (FourierFeatures<16>) side by side on
//                      the same points, and reports the three errors. The residual grows as k^2 (k = 6),
//                      its square as k^4: the boundary weight is 100 k^4 (Poisson's 100, scaled alike).
//   --problem heat:    u_t = alpha u_xx on (x, t) in [0,1]^2, alpha = 0.1, u(x, 0) = sin(pi x),
//                      u(0, t) = u(1, t) = 0; exact u = exp(-alpha pi^2 t) sin(pi x). Interior loss
//                      mean (u_t - alpha u_xx)^2 (the gradient and the Hessian diagonal entry of x).
// Boundary loss: mean (u - g)^2 over the boundary points. Training: Adam, then L-BFGS (chainlet::LBFGS) on
// the flat parameter vector. Ends with `rel_l2_error=<v> us_per_step=<v> checksum=<hex>`: the relative L2
// error on a 101 x 101 grid against the exact solution, the Adam step time, the final parameters' FNV-1a.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common/args.hpp"
#include "pinn/pinn.hpp"

using pinn::RunOptions;

namespace {

// poisson-hf: the three networks on the same points and seed, one after the other; the csv of each gets
// its network's name before the extension.
template <class T>
int run_problem(const std::string& problem, const RunOptions& o, const std::string& csv) {
    if (problem != "poisson-hf") {
        pinn::run<pinn::Net, T>("MLP 2-32-32-32-1 tanh", o, 1, csv);
        if (!csv.empty()) std::printf("plot: /usr/bin/python3 examples/pinn/plot.py %s docs/pinn.png\n", csv.c_str());
        return 0;
    }
    auto named = [&](const char* tag) {
        if (csv.empty()) return csv;
        const auto dot = csv.rfind('.');
        return dot == std::string::npos ? csv + "-" + tag : csv.substr(0, dot) + "-" + tag + csv.substr(dot);
    };
    const double k = pinn::k_of(true);
    const double e_tanh = pinn::run<pinn::Net, T>("MLP 2-32-32-32-1 tanh", o, k, named("tanh"));
    const double e_sine = pinn::run<pinn::SineNet, T>("sine network 2-32-32-32-1, sin(30 z) then sin(z)", o, k, named("sine"));
    const double e_fourier =
        pinn::run<pinn::FourierNet, T>("Fourier features 16, sigma 1, then MLP 32-32-1 tanh", o, k, named("fourier"));
    if (!csv.empty())
        std::printf("plot: /usr/bin/python3 examples/pinn/plot.py %s %s %s docs/pinn_hf.png\n", named("tanh").c_str(),
                    named("sine").c_str(), named("fourier").c_str());
    std::printf("poisson-hf: rel_l2_error tanh MLP %.3e, sine network %.3e (%zu parameters each), Fourier features "
                "%.3e (%zu parameters, %zu of them the fixed frequencies)\n",
                e_tanh, e_sine, pinn::Net::num_params, e_fourier, pinn::FourierNet::num_params,
                pinn::FourierNet::num_fixed_params);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"A physics-informed network: u, grad u and second derivatives of an MLP inside the loss "
                 "(Poisson on the unit square, or the heat equation).", "pinn"};
    examples::show_defaults(app);
    std::string problem = "poisson", csv = "pinn.csv";
    std::uint64_t steps = 2000, lbfgs_steps = 2000, points = 1024, threads = 1, seed = 1, resample = 0;
    double lr = 2e-3, boundary_weight = 0;
    bool float32 = false, balance = false;
    app.add_option("--problem", problem, "poisson, poisson-hf (a higher frequency: the tanh MLP, a sine network and Fourier features) or heat")
        ->check(CLI::IsMember({"poisson", "poisson-hf", "heat"}));
    app.add_option("--steps", steps, "Adam steps")->check(examples::whole(0, 10000000));
    app.add_option("--lbfgs-steps", lbfgs_steps, "L-BFGS iterations after Adam (chainlet/optim/lbfgs.hpp)")->check(examples::whole(0, 10000000));
    app.add_option("--points", points, "interior collocation points (boundary: a quarter as many)")
        ->check(examples::whole(16, 10000000));
    app.add_option("--threads", threads, "threads (the results do not depend on it)")->check(examples::whole(1, 1024));
    app.add_option("--seed", seed, "seed of the points and the initial parameters")->check(examples::whole(0, UINT64_MAX));
    app.add_option("--lr", lr, "Adam's learning rate (decayed to 1/10 over the Adam steps)")->check(examples::real(1e-8, 1.0));
    app.add_option("--boundary-weight", boundary_weight,
                   "weight of the boundary term in the loss (the start with --balance); 0 = the problem's: 100 for "
                   "Poisson, 100 k^4 = 129600 for poisson-hf, 1 for heat")
        ->check(examples::real(0, 1e9));
    app.add_option("--resample", resample,
                   "every K Adam steps, redraw the interior points where the residual is large (RAD); 0 = never")
        ->check(examples::whole(0, 10000000));
    app.add_flag("--balance", balance,
                 "adapt the boundary weight during Adam by gradient-norm balancing (every 10 steps; L-BFGS keeps the last)");
    app.add_option("--csv", csv, "the solution on the 101 x 101 grid (x, y, u, exact); empty: none");
    app.add_flag("--float32", float32, "train in float32 (default float64)");
    if (const int status = examples::parse(app, argc, argv); status >= 0) return status;
    const bool heat = problem == "heat";
    // Poisson's residual (f up to 2 pi^2) outweighs its boundary values (u = 0) unless the boundary term
    // is weighted; the heat problem's initial values are of the residual's size (examples/pinn/README.md).
    if (boundary_weight == 0) boundary_weight = heat ? 1 : 100 * std::pow(pinn::k_of(problem == "poisson-hf"), 4);
    const RunOptions o{.heat = heat, .steps = steps, .lbfgs_steps = lbfgs_steps, .points = points, .resample = resample,
                       .threads = static_cast<int>(threads), .seed = seed, .lr = lr, .boundary_weight = boundary_weight,
                       .balance = balance};
    return float32 ? run_problem<float>(problem, o, csv) : run_problem<double>(problem, o, csv);
}
