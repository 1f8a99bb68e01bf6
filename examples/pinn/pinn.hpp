// The problems, the networks and the training run of examples/pinn (main.cpp). The networks' runs
// compile in translation units of their own (run_*.cpp), in parallel; main.cpp sees their explicit
// instantiation declarations.
#pragma once

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
#include <type_traits>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/checksum.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "chainlet/optim/lbfgs.hpp"

namespace pinn {

using namespace chainlet;

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
inline double k_of(bool hf) { return hf ? 6 : 1; }

inline double exact(bool heat, double x, double y, double k = 1) {
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

// The step of a central difference along v at p, h = 1e-5 (1 + |p|) / |v| (L2 norms); 0 when v is 0.
template <class T>
double difference_step(std::span<const T> p, std::span<const T> v) {
    double pn = 0, vn = 0;
    for (std::size_t j = 0; j < p.size(); ++j) {
        pn += static_cast<double>(p[j]) * static_cast<double>(p[j]);
        vn += static_cast<double>(v[j]) * static_cast<double>(v[j]);
    }
    return vn == 0 ? 0 : 1e-5 * (1 + std::sqrt(pn)) / std::sqrt(vn);
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

    // The Gauss-Newton product G v of the loss, for Newton-CG (bench/optimizers_pinn.cpp), whose exact H v
    // the derivative passes do not give for residual losses. loss = (1/ni) sum r_i^2 + (w/nb) sum b_j^2,
    // r the PDE residual, b = u - g on the boundary, so G = (2/ni) J_r' J_r + (2w/nb) J_b' J_b with J the
    // residuals' Jacobians in the parameters: positive semi-definite, H without the residuals' second
    // derivatives. J v by central differences of the residuals at p +- h v, h = 1e-5 (1 + |p|) / |v|
    // (error O(h^2)); J' a exactly, as the parameter gradient of sum a_i r_i (the pass's pullback). In
    // double: a shift of 1e-5 (1 + |p|) is near float's rounding, where the differences mean nothing.
    void gauss_newton_product(std::span<const T> p, std::span<const T> v, std::span<T> out) {
        static_assert(std::is_same_v<T, double>, "gauss_newton_product: the differences need double");
        const std::size_t P = N::num_params, C = interior.spec().columns();
        const double h = difference_step(p, v);
        std::ranges::fill(out, T(0));
        if (h == 0) return;
        shifted.resize(P);
        gn_interior[0].resize(ni * C), gn_interior[1].resize(ni * C), gn_boundary[0].resize(nb), gn_boundary[1].resize(nb);
        for (int side = 0; side < 2; ++side) {
            const double sign = side == 0 ? 1 : -1;
            for (std::size_t j = 0; j < P; ++j)
                shifted[j] = static_cast<T>(static_cast<double>(p[j]) + sign * h * static_cast<double>(v[j]));
            interior.derivatives(shifted, xi, gn_interior[side], threads);
            boundary.derivatives(shifted, xb, gn_boundary[side], threads);
        }
        // J v: the source and the boundary values cancel in the differences
        jv_interior.resize(ni), jv_boundary.resize(nb);
        for (std::size_t s = 0; s < ni; ++s) {
            const T* a = gn_interior[0].data() + s * C;
            const T* b = gn_interior[1].data() + s * C;
            const double d = heat ? static_cast<double>(a[2] - b[2]) - alpha * static_cast<double>(a[3] - b[3])
                                  : static_cast<double>(a[3] - b[3]);
            jv_interior[s] = static_cast<T>(d / (2 * h));
        }
        for (std::size_t s = 0; s < nb; ++s)
            jv_boundary[s] = static_cast<T>(static_cast<double>(gn_boundary[0][s] - gn_boundary[1][s]) / (2 * h));
        // J' a with a = 2 J v (the passes' scale carries 1/ni and w/nb): the cotangents of sum a_i r_i
        const T* jvi = jv_interior.data();
        const bool is_heat = heat;
        const auto interior_cotangent = [jvi, is_heat](const PointDerivatives<T>& d, PointCotangents<T>& c, T scale) {
            for (std::size_t k = 0; k < d.n; ++k) {
                const T a = T(2) * scale * jvi[d.first_sample + k];
                if (is_heat) {
                    c.du(1)[k] += a;
                    c.d2u(0)[k] -= static_cast<T>(alpha) * a;
                } else {
                    c.d2u(0)[k] += a;
                }
            }
            return T(0);
        };
        const T* jvb = jv_boundary.data();
        const auto boundary_cotangent = [jvb](const PointDerivatives<T>& d, PointCotangents<T>& c, T scale) {
            for (std::size_t k = 0; k < d.n; ++k) c.u()[k] += T(2) * scale * jvb[d.first_sample + k];
            return T(0);
        };
        interior.add_value_and_gradient(p, out, xi, interior_cotangent, T(1), threads);
        boundary.add_value_and_gradient(p, out, xb, boundary_cotangent, boundary_weight, threads);
    }
    std::vector<T> shifted, gn_interior[2], gn_boundary[2], jv_interior, jv_boundary;  // gauss_newton_product()'s

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


// The options of a run (main's flags).
struct RunOptions {
    bool heat = false;
    std::size_t steps = 0, lbfgs_steps = 0, points = 0, resample = 0;
    int threads = 1;
    std::uint64_t seed = 1;
    double lr = 0, boundary_weight = 0;
    bool balance = false;
};

// Trains network N on the problem and returns the relative L2 error on the grid.
template <class N, class T>
double run(const char* network, const RunOptions& o, double k, const std::string& csv) {
    const bool heat = o.heat;
    const std::size_t steps = o.steps, lbfgs_steps = o.lbfgs_steps, points = o.points, resample = o.resample;
    const int threads = o.threads;
    const std::uint64_t seed = o.seed;
    const double lr = o.lr, boundary_weight = o.boundary_weight;
    const bool balance = o.balance;
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

// run<N, T>'s instances in translation units of their own (run_*.cpp): one per network, and the sine
// network's one per type (its sine epilogues have no instances in libchainlet, so they compile there).
#define PINN_RUN_INSTANCE(prefix, N, T) \
    prefix double run<N, T>(const char*, const RunOptions&, double, const std::string&);
#define PINN_RUN_INSTANCES(prefix, N) PINN_RUN_INSTANCE(prefix, N, float) PINN_RUN_INSTANCE(prefix, N, double)
PINN_RUN_INSTANCES(extern template, Net)
PINN_RUN_INSTANCES(extern template, SineNet)
PINN_RUN_INSTANCES(extern template, FourierNet)

}  // namespace pinn
