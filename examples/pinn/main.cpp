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
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numbers>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/checksum.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "chainlet/optim/lbfgs.hpp"
#include "common/args.hpp"


using namespace chainlet;

namespace {

using Net = Chain<Input<2>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<1>>;
// The sine network of poisson-hf (as many parameters as Net): sin(30 z) in the first layer, whose
// Glorot-initialised features then span the solution's frequencies (SIREN, Sitzmann et al. 2020), then
// sin(z).
using SineNet = Chain<Input<2>, Dense<32, Sin<30>>, Dense<32, Sin<>>, Dense<32, Sin<>>, Dense<1>>;
// The Fourier-feature network of poisson-hf (2145 parameters): sin and cos of 2 pi B x for 16 fixed random
// frequencies B ~ N(0, 1), then a tanh MLP. Scale 1: the best of the scales tried (examples/pinn/README.md).
using FourierNet = Chain<Input<2>, FourierFeatures<16>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<1>>;
constexpr double pi = std::numbers::pi;
constexpr double alpha = 0.1;
// Poisson's frequency: u = sin(k pi x) sin(k pi y)
double k_of(bool hf) { return hf ? 6 : 1; }

double exact(bool heat, double x, double y, double k = 1) {
    return heat ? std::exp(-alpha * pi * pi * y) * std::sin(pi * x) : std::sin(k * pi * x) * std::sin(k * pi * y);
}

// Points as rows (x, y) / (x, t), drawn uniformly; boundary points spread over the boundary pieces.
template <class T>
void make_points(bool heat, double k, std::size_t n_interior, std::size_t n_boundary, std::uint64_t seed,
                 std::vector<T>& xi, std::vector<T>& xb, std::vector<T>& gb) {
    Rng rng(seed * 7919 + 1);
    xi.resize(2 * n_interior);
    for (auto& v : xi) v = static_cast<T>(rng.uniform());
    xb.resize(2 * n_boundary);
    gb.resize(n_boundary);
    for (std::size_t s = 0; s < n_boundary; ++s) {
        const double r = rng.uniform();
        double x = 0, y = 0;
        // Poisson: the four edges in turn; heat: t = 0 (half the points), then x = 0 and x = 1.
        const std::size_t piece = heat ? (s % 2 == 0 ? 0 : 1 + (s / 2) % 2) : s % 4;
        if (piece == 0) x = r, y = 0;
        else if (piece == 1) x = 0, y = r;
        else if (piece == 2) x = 1, y = r;
        else x = r, y = 1;
        xb[2 * s] = static_cast<T>(x);
        xb[2 * s + 1] = static_cast<T>(y);
        gb[s] = static_cast<T>(exact(heat, x, y, k));  // 0 on the Dirichlet edges, sin(pi x) at t = 0
    }
}

template <class N, class T>
struct Problem {
    bool heat;
    double k;  // Poisson's frequency
    std::size_t ni, nb;
    std::vector<T> xi, xb, gb;
    int threads;
    DerivativeWorkspace<N, T> interior, boundary;
    std::vector<T> f;  // Poisson's f at the interior points
    struct Zero {
        T operator()(const T*, std::size_t) const { return T(0); }
    };
    struct MinusF {
        const T* f;
        T operator()(const T*, std::size_t s) const { return -f[s]; }
    };
    // r = Lap u + f (Poisson), r = u_t - alpha u_xx (heat)
    LinearResidual<T, MinusF> poisson;
    LinearResidual<T, Zero> heat_pde;

    Problem(bool heat_, double k_, std::size_t n, std::uint64_t seed, int threads_)
        : heat(heat_), k(k_), ni(n), nb(std::max<std::size_t>(n / 4, 4)), threads(threads_),
          interior(heat ? DerivativeSpec::diagonal(2, {0}) : DerivativeSpec::laplacian(2), n, threads_),
          boundary(DerivativeSpec::value(), std::max<std::size_t>(n / 4, 4), threads_),
          poisson(linear_residual<T>({}, {T(1)}, MinusF{nullptr})),
          heat_pde(linear_residual<T>({T(0), T(1)}, {T(-alpha)}, Zero{})) {
        make_points(heat, k, ni, nb, seed, xi, xb, gb);
        source_at_points();
    }

    // Poisson's f at the interior points
    void source_at_points() {
        f.resize(ni);
        for (std::size_t s = 0; s < ni; ++s)
            f[s] = static_cast<T>(2 * k * k * pi * pi * std::sin(k * pi * static_cast<double>(xi[2 * s])) *
                                  std::sin(k * pi * static_cast<double>(xi[2 * s + 1])));
        poisson.source.f = f.data();
    }

    // Residual-based adaptive distribution (RAD; Wu et al. 2023, "A comprehensive study of non-adaptive
    // and residual-based adaptive sampling for physics-informed neural networks"): 4 ni candidates drawn
    // uniformly, then ni interior points drawn from them (with replacement) with probability
    // proportional to r^2 / mean(r^2) + 1, r the PDE residual at the candidate.
    void resample(std::span<const T> p, Rng& rng) {
        const std::size_t m = 4 * ni, C = interior.spec().columns();
        candidates.resize(2 * m);
        for (auto& v : candidates) v = static_cast<T>(rng.uniform());
        derivatives.resize(m * C);
        interior.derivatives(p, candidates, derivatives, threads);
        cumulative.resize(m);
        double sum = 0;
        for (std::size_t s = 0; s < m; ++s) {
            // columns: u, du/dx0, du/dx1, then Lap u (Poisson) or d2u/dx0^2 (heat)
            const T* d = derivatives.data() + s * C;
            const double x = static_cast<double>(candidates[2 * s]), y = static_cast<double>(candidates[2 * s + 1]);
            const double f_at = 2 * k * k * pi * pi * std::sin(k * pi * x) * std::sin(k * pi * y);
            const double r = heat ? static_cast<double>(d[2]) - alpha * static_cast<double>(d[3])
                                  : static_cast<double>(d[3]) + f_at;
            cumulative[s] = r * r;
            sum += r * r;
        }
        const double mean = sum / static_cast<double>(m);
        double total = 0;
        for (auto& c : cumulative) c = total += (mean > 0 ? c / mean : 0) + 1;
        for (std::size_t s = 0; s < ni; ++s) {
            const double u = rng.uniform() * total;
            const std::size_t k = std::min<std::size_t>(
                static_cast<std::size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin()), m - 1);
            xi[2 * s] = candidates[2 * k];
            xi[2 * s + 1] = candidates[2 * k + 1];
        }
        source_at_points();
    }
    std::vector<T> candidates, derivatives;  // resample()'s
    std::vector<double> cumulative;

    T boundary_weight = 1;  // w in the loss below
    std::vector<T> g_interior, g_boundary;  // balance()'s gradients of the two terms

    // mean r^2 over the interior, its gradient added into g
    T interior_term(std::span<const T> p, std::span<T> g) {
        return heat ? interior.add_value_and_gradient(p, g, xi, heat_pde, T(1), threads)
                    : interior.add_value_and_gradient(p, g, xi, poisson, T(1), threads);
    }
    // scale mean (u - g)^2 over the boundary, its gradient added into g
    T boundary_term(std::span<const T> p, std::span<T> g, T scale) {
        // r = u - g(x): the boundary values are looked up by sample index
        const T* gbv = gb.data();
        const auto bc = [gbv](const PointDerivatives<T>& d, PointCotangents<T>& c, T s) {
            T sum = 0;
            for (std::size_t k = 0; k < d.n; ++k) {
                const T r = d.u()[k] - gbv[d.first_sample + k];
                sum += r * r;
                c.u()[k] += T(2) * s * r;
            }
            return sum;
        };
        return boundary.add_value_and_gradient(p, g, xb, bc, scale, threads);
    }

    // loss = mean r^2 over the interior + w mean (u - g)^2 over the boundary; g overwritten with its gradient.
    T loss_and_gradient(std::span<const T> p, std::span<T> g) {
        std::ranges::fill(g, T(0));
        const T l = interior_term(p, g);
        return l + boundary_term(p, g, boundary_weight);
    }

    // Gradient-norm balancing (Wang et al. 2023, "An expert's guide to training physics-informed neural
    // networks"): the weights make the terms' gradients equally long, w <- 0.9 w + 0.1 |dL_interior/dp| /
    // |dL_boundary/dp| (L2 norms, the interior weight kept at 1), so that neither term's gradient drowns
    // the other's.
    void balance(std::span<const T> p) {
        g_interior.assign(N::num_params, T(0));
        g_boundary.assign(N::num_params, T(0));
        interior_term(p, g_interior);
        boundary_term(p, g_boundary, T(1));
        double interior_norm = 0, boundary_norm = 0;
        for (std::size_t j = 0; j < N::num_params; ++j) {
            interior_norm += static_cast<double>(g_interior[j]) * static_cast<double>(g_interior[j]);
            boundary_norm += static_cast<double>(g_boundary[j]) * static_cast<double>(g_boundary[j]);
        }
        if (boundary_norm > 0)
            boundary_weight = static_cast<T>(0.9 * static_cast<double>(boundary_weight) +
                                             0.1 * std::sqrt(interior_norm / boundary_norm));
    }
};

template <class N, class T>
double grid_error(bool heat, double k, const std::vector<T>& p, const char* csv) {
    const std::size_t G = 101;
    std::vector<T> x(2 * G * G), u(G * G);
    for (std::size_t i = 0; i < G; ++i)
        for (std::size_t j = 0; j < G; ++j) {
            x[2 * (i * G + j)] = static_cast<T>(static_cast<double>(j) / (G - 1));
            x[2 * (i * G + j) + 1] = static_cast<T>(static_cast<double>(i) / (G - 1));
        }
    predict<N>(p, x, u);
    double err = 0, ref = 0;
    std::ofstream out;
    if (csv) {
        out.open(csv);
        if (!out) throw std::runtime_error(std::string("cannot write ") + csv);
        out << (heat ? "x,t,u,exact\n" : "x,y,u,exact\n");
    }
    for (std::size_t i = 0; i < G * G; ++i) {
        const double a = static_cast<double>(x[2 * i]), b = static_cast<double>(x[2 * i + 1]);
        const double e = exact(heat, a, b, k), d = static_cast<double>(u[i]) - e;
        err += d * d;
        ref += e * e;
        if (csv) out << a << ',' << b << ',' << static_cast<double>(u[i]) << ',' << e << '\n';
    }
    return std::sqrt(err / ref);
}


// Trains network N on the problem and returns the relative L2 error on the grid.
template <class N, class T>
double run(const char* network, bool heat, double k, std::size_t steps, std::size_t lbfgs_steps, std::size_t points,
           int threads, std::uint64_t seed, double lr, double boundary_weight, bool balance, std::size_t resample,
           const std::string& csv) {
    Problem<N, T> problem(heat, k, points, seed, threads);
    problem.boundary_weight = static_cast<T>(boundary_weight);
    std::vector<T> p(N::num_params), g(N::num_params);
    init_params<N>(p, seed);
    const std::string what = heat ? "heat u_t = 0.1 u_xx"
                             : k == 1 ? "Poisson -Lap u = f"
                                      : "Poisson -Lap u = f, u = sin(" + std::to_string(static_cast<int>(k)) + " pi x) sin(" +
                                            std::to_string(static_cast<int>(k)) + " pi y)";
    std::printf("pinn: %s, %s, %s (%zu parameters), %zu interior + %zu boundary points, boundary weight %g%s, %d "
                "thread(s)\n",
                what.c_str(), sizeof(T) == 4 ? "float32" : "float64", network, N::num_params, problem.ni, problem.nb,
                boundary_weight, balance ? " (balanced)" : "", threads);
    Adam<T> opt(static_cast<T>(lr));
    opt.init(p.size());
    Rng resample_rng(seed * 104729 + 7);
    const std::size_t every = std::max<std::size_t>(1, steps / 20);
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    for (std::size_t it = 1; it <= steps; ++it) {
        // the learning rate decays geometrically from lr to lr / 10 over the Adam phase
        opt.set_learning_rate(static_cast<T>(lr * std::pow(0.1, static_cast<double>(it - 1) / static_cast<double>(steps))));
        if (balance && it % 10 == 1) problem.balance(p);
        if (resample > 0 && it % resample == 0) problem.resample(p, resample_rng);
        const T l = problem.loss_and_gradient(p, g);
        if (!std::isfinite(static_cast<double>(l)))
            throw std::runtime_error("the loss became non-finite at Adam step " + std::to_string(it));
        opt.step(std::span<T>(p), std::span<const T>(g));
        if (it % every == 0 || it == 1)
            std::printf("adam step %zu  loss %.6e  boundary weight %.4g\n", it, static_cast<double>(l),
                        static_cast<double>(problem.boundary_weight)),
                std::fflush(stdout);
    }
    const double adam_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // CPU time as well: on a shared machine a neighbour's load stretches the wall time.
    const double adam_cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    std::printf("adam: %zu steps in %.2f s (%.2f s CPU), rel_l2_error %.3e\n", steps, adam_seconds, adam_cpu,
                grid_error<N>(heat, k, p, nullptr));
    double lbfgs_seconds = 0;
    if (lbfgs_steps > 0) {
        const auto t1 = std::chrono::steady_clock::now();
        // a long history, as PyTorch's LBFGS (history_size 100): PINN losses are badly conditioned
        LBFGS<T> lbfgs({.history = 50, .max_iterations = lbfgs_steps, .gradient_tolerance = 1e-12});
        const std::size_t every_lbfgs = std::max<std::size_t>(1, lbfgs_steps / 10);
        const MinimizeResult r = lbfgs.minimize(
            std::span<T>(p),
            [&](std::span<const T> at, std::span<T> grad) {
                return static_cast<double>(problem.loss_and_gradient(at, grad));
            },
            [&](const MinimizeIteration& it) {
                if (it.iteration % every_lbfgs == 0)
                    std::printf("lbfgs iteration %zu  loss %.6e  (%zu evaluations)\n", it.iteration, it.loss, it.evaluations),
                        std::fflush(stdout);
                return false;
            });
        std::printf("lbfgs: stopped after %zu iterations, %zu evaluations, loss %.6e: %s\n", r.iterations, r.evaluations,
                    r.loss, to_string(r.stop));
        lbfgs_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
        std::printf("lbfgs: %.2f s\n", lbfgs_seconds);
    }
    const double err = grid_error<N>(heat, k, p, csv.empty() ? nullptr : csv.c_str());
    if (!csv.empty()) std::printf("wrote %s\n", csv.c_str());
    std::printf("total training time %.2f s\n", adam_seconds + lbfgs_seconds);
    std::printf("rel_l2_error=%.4e us_per_step=%.1f checksum=%016" PRIx64 "\n", err,
                1e6 * adam_seconds / static_cast<double>(std::max<std::size_t>(steps, 1)),
                checksum(std::span<const T>(p)));
    return err;
}

// poisson-hf: the three networks on the same points and seed, one after the other; the csv of each gets
// its network's name before the extension.
template <class T>
int run_problem(const std::string& problem, std::size_t steps, std::size_t lbfgs_steps, std::size_t points,
                int threads, std::uint64_t seed, double lr, double boundary_weight, bool balance, std::size_t resample,
                const std::string& csv) {
    const bool heat = problem == "heat";
    if (problem != "poisson-hf") {
        run<Net, T>("MLP 2-32-32-32-1 tanh", heat, 1, steps, lbfgs_steps, points, threads, seed, lr, boundary_weight,
                    balance, resample, csv);
        if (!csv.empty()) std::printf("plot: /usr/bin/python3 examples/pinn/plot.py %s docs/pinn.png\n", csv.c_str());
        return 0;
    }
    auto named = [&](const char* tag) {
        if (csv.empty()) return csv;
        const auto dot = csv.rfind('.');
        return dot == std::string::npos ? csv + "-" + tag : csv.substr(0, dot) + "-" + tag + csv.substr(dot);
    };
    const double k = k_of(true);
    const double e_tanh = run<Net, T>("MLP 2-32-32-32-1 tanh", false, k, steps, lbfgs_steps, points, threads, seed, lr,
                                      boundary_weight, balance, resample, named("tanh"));
    const double e_sine = run<SineNet, T>("sine network 2-32-32-32-1, sin(30 z) then sin(z)", false, k, steps, lbfgs_steps,
                                          points, threads, seed, lr, boundary_weight, balance, resample, named("sine"));
    const double e_fourier =
        run<FourierNet, T>("Fourier features 16, sigma 1, then MLP 32-32-1 tanh", false, k, steps, lbfgs_steps, points,
                           threads, seed, lr, boundary_weight, balance, resample, named("fourier"));
    if (!csv.empty())
        std::printf("plot: /usr/bin/python3 examples/pinn/plot.py %s %s %s docs/pinn_hf.png\n", named("tanh").c_str(),
                    named("sine").c_str(), named("fourier").c_str());
    std::printf("poisson-hf: rel_l2_error tanh MLP %.3e, sine network %.3e (%zu parameters each), Fourier features "
                "%.3e (%zu parameters)\n",
                e_tanh, e_sine, Net::num_params, e_fourier, FourierNet::num_params);
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
    if (boundary_weight == 0) boundary_weight = heat ? 1 : 100 * std::pow(k_of(problem == "poisson-hf"), 4);
    const int t = static_cast<int>(threads);
    return float32 ? run_problem<float>(problem, steps, lbfgs_steps, points, t, seed, lr, boundary_weight, balance, resample, csv)
                   : run_problem<double>(problem, steps, lbfgs_steps, points, t, seed, lr, boundary_weight, balance, resample, csv);
}
