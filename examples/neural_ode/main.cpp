// A universal differential equation: learn the unknown interaction term of a Lotka–Volterra system
// from noisy trajectories.
//
//   true system:  x' = alpha x - beta x y,    y' = delta x y - gamma y
//   model:        u' = A u + NN(u),  A = diag(alpha, -gamma)  (the known linear growth and decay),
//                 NN: 2 -> 32 tanh -> 32 tanh -> 2 in double, standing in for (-beta x y, delta x y)
//
// The model is integrated with fixed-step RK4; the gradient of the mean squared error against the
// observations is computed by backpropagating through the RK4 steps (the discrete adjoint) with
// chainlet's pullback API: the forward pass stores the state after every step, the backward pass walks
// the steps in reverse, re-records the step's four stage evaluations and pulls the cotangent back
// through them. Training runs Adam or L-BFGS (chainlet::LBFGS) on the flat parameter vector.
//
// Prints the loss as it trains and ends with `initial_loss=<v> final_loss=<v> us_per_iteration=<v>`;
// writes true, observed and fitted trajectories to a CSV (plot.py turns it into a PNG).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "chainlet/optim/lbfgs.hpp"

#include "chainlet/chainlet.hpp"
#include "common/args.hpp"

using namespace chainlet;
using Net = Chain<Input<2>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<2>>;

namespace {

constexpr std::size_t D = 2;  // state: (prey x, predator y)
constexpr double alpha = 1.3, beta = 0.9, gamma_ = 0.8, delta = 1.8;

using State = std::span<double>;
using ConstState = std::span<const double>;

// One RK4 step of u' = f(u) for a block of rows: out = u + h/6 (k1 + 2 k2 + 2 k3 + k4). k[i] receive
// the stage slopes; stage(i, s, k) evaluates f at stage input s.
template <class F>
void rk4_step(ConstState u, double h, std::array<std::vector<double>, 4>& k, std::vector<double>& s, State out, F&& stage) {
    const std::size_t m = u.size();
    stage(0, u, State(k[0]));
    for (std::size_t i = 0; i < m; ++i) s[i] = u[i] + 0.5 * h * k[0][i];
    stage(1, ConstState(s), State(k[1]));
    for (std::size_t i = 0; i < m; ++i) s[i] = u[i] + 0.5 * h * k[1][i];
    stage(2, ConstState(s), State(k[2]));
    for (std::size_t i = 0; i < m; ++i) s[i] = u[i] + h * k[2][i];
    stage(3, ConstState(s), State(k[3]));
    for (std::size_t i = 0; i < m; ++i) out[i] = u[i] + h / 6 * (k[0][i] + 2 * k[1][i] + 2 * k[2][i] + k[3][i]);
}

void true_rhs(ConstState u, State du) {
    for (std::size_t r = 0; r < u.size() / D; ++r) {
        const double x = u[r * D], y = u[r * D + 1];
        du[r * D] = alpha * x - beta * x * y;
        du[r * D + 1] = delta * x * y - gamma_ * y;
    }
}

// The training set: K trajectories observed every `obs_every` model steps of size h.
struct Data {
    std::size_t trajectories, steps, obs_every;
    double h;
    std::vector<double> observed;  // (steps / obs_every + 1) blocks of K x D, the first at t = 0
    std::vector<double> truth;     // the same without noise
};

// Integrates the true system with RK4 at step h / fine from random initial states, over `steps`
// (plus `extra` for the plot) model steps, and adds Gaussian noise of standard deviation sigma.
Data make_data(std::size_t K, std::size_t steps, std::size_t obs_every, double h, std::size_t extra, double sigma,
               std::uint64_t seed) {
    Rng rng(seed);
    Data d{K, steps, obs_every, h, {}, {}};
    std::vector<double> u(K * D);
    for (std::size_t r = 0; r < K; ++r) {
        u[r * D] = 0.5 + 1.5 * rng.uniform();      // prey in [0.5, 2]
        u[r * D + 1] = 0.5 + 1.5 * rng.uniform();  // predators in [0.5, 2]
    }
    constexpr std::size_t fine = 50;
    std::array<std::vector<double>, 4> k;
    for (auto& v : k) v.resize(K * D);
    std::vector<double> s(K * D), next(K * D);
    for (std::size_t step = 0; step <= steps + extra; ++step) {
        if (step % obs_every == 0) d.truth.insert(d.truth.end(), u.begin(), u.end());
        for (std::size_t f = 0; f < fine; ++f) {
            rk4_step(u, h / fine, k, s, next, [](std::size_t, ConstState a, State b) { true_rhs(a, b); });
            u.swap(next);
        }
    }
    d.observed = d.truth;
    for (auto& v : d.observed) v += sigma * rng.normal();
    return d;
}

// The model u' = A u + NN(u) and the loss L(p) = mean over observations t_j > 0, trajectories and
// components of (u(t_j) - observed_j)^2, with u(0) = the observed initial state. Every buffer is
// allocated here; loss() and loss_and_gradient() allocate nothing.
class NeuralODE {
public:
    explicit NeuralODE(const Data& d)
        : d_(d),
          m_(d.trajectories * D),
          ws_{PullbackWorkspace<Net, double>(d.trajectories), PullbackWorkspace<Net, double>(d.trajectories),
              PullbackWorkspace<Net, double>(d.trajectories), PullbackWorkspace<Net, double>(d.trajectories)},
          states_((d.steps + 1) * m_),
          s_(m_), ubar_(m_), sbar_(m_) {
        for (auto& v : k_) v.resize(m_);
        for (auto& v : kbar_) v.resize(m_);
    }

    std::size_t observations() const { return d_.steps / d_.obs_every; }

    // Integrates every trajectory for `steps` steps from the observed initial states into states_
    // (steps + 1 blocks of K x D) and returns the loss over the training window.
    double loss(std::span<const double> p) { return integrate(p, d_.steps); }

    // The loss and its gradient g (overwritten) by the discrete adjoint of RK4.
    double loss_and_gradient(std::span<const double> p, std::span<double> g) {
        const double l = integrate(p, d_.steps);
        std::fill(g.begin(), g.end(), 0.0);
        std::fill(ubar_.begin(), ubar_.end(), 0.0);
        const double scale = 2.0 / static_cast<double>(observations() * m_);  // d/du of the mean square
        for (std::size_t n = d_.steps; n-- > 0;) {
            // ubar = dL/du_{n+1} so far; add the observation at step n + 1, then pull back through step n.
            if ((n + 1) % d_.obs_every == 0) {
                const double* o = &d_.observed[(n + 1) / d_.obs_every * m_];
                const double* u = &states_[(n + 1) * m_];
                for (std::size_t i = 0; i < m_; ++i) ubar_[i] += scale * (u[i] - o[i]);
            }
            // Re-record the four stage evaluations of step n (same inputs, same bits as the forward).
            rk4_step(ConstState(&states_[n * m_], m_), d_.h, k_, s_, State(sbar_),
                     [&](std::size_t i, ConstState s, State k) { rhs(ws_[i], p, s, k); });
            // u' = u + h/6 (k1 + 2 k2 + 2 k3 + k4) with s1 = u, s2 = u + h/2 k1, s3 = u + h/2 k2,
            // s4 = u + h k3 and k_i = f(s_i):  kbar_i = w_i h ubar', then from the last stage back,
            // sbar_i = f'(s_i)^T kbar_i, ubar += sbar_i and kbar_{i-1} += c_i sbar_i (c = h/2, h/2, h).
            const double h = d_.h, w[4] = {h / 6, h / 3, h / 3, h / 6}, c[4] = {0, h / 2, h / 2, h};
            for (std::size_t i = 0; i < 4; ++i)
                for (std::size_t j = 0; j < m_; ++j) kbar_[i][j] = w[i] * ubar_[j];
            for (std::size_t i = 4; i-- > 0;) {
                rhs_pullback(ws_[i], p, kbar_[i], sbar_, g);
                for (std::size_t j = 0; j < m_; ++j) {
                    ubar_[j] += sbar_[j];
                    if (i > 0) kbar_[i - 1][j] += c[i] * sbar_[j];
                }
            }
        }
        return l;
    }

    // The fitted trajectories over `steps` steps (may exceed the training window) into out.
    void trajectories(std::span<const double> p, std::size_t steps, std::vector<double>& out) {
        if (states_.size() < (steps + 1) * m_) states_.resize((steps + 1) * m_);
        integrate(p, steps);
        out.assign(states_.begin(), states_.begin() + static_cast<std::ptrdiff_t>((steps + 1) * m_));
    }

private:
    // f(s) = A s + NN(s) for the K rows of s; records the evaluation in ws for rhs_pullback.
    void rhs(PullbackWorkspace<Net, double>& ws, std::span<const double> p, ConstState s, State k) {
        forward(ws, p, s, k);
        for (std::size_t r = 0; r < d_.trajectories; ++r) {
            k[r * D] += alpha * s[r * D];
            k[r * D + 1] -= gamma_ * s[r * D + 1];
        }
    }
    // sbar = f'(s)^T kbar = A^T kbar + NN'(s)^T kbar at the evaluation recorded in ws; g += NN_p^T kbar.
    void rhs_pullback(PullbackWorkspace<Net, double>& ws, std::span<const double> p, std::span<const double> kbar,
                      State sbar, std::span<double> g) {
        pullback(ws, p, kbar, sbar, g);
        for (std::size_t r = 0; r < d_.trajectories; ++r) {
            sbar[r * D] += alpha * kbar[r * D];
            sbar[r * D + 1] -= gamma_ * kbar[r * D + 1];
        }
    }

    double integrate(std::span<const double> p, std::size_t steps) {
        std::copy_n(d_.observed.begin(), m_, states_.begin());
        double sum = 0;
        for (std::size_t n = 0; n < steps; ++n) {
            rk4_step(ConstState(&states_[n * m_], m_), d_.h, k_, s_, State(&states_[(n + 1) * m_], m_),
                     [&](std::size_t, ConstState s, State k) { rhs(ws_[0], p, s, k); });
            if ((n + 1) % d_.obs_every == 0 && n + 1 <= d_.steps) {
                const double* o = &d_.observed[(n + 1) / d_.obs_every * m_];
                for (std::size_t i = 0; i < m_; ++i) sum += (states_[(n + 1) * m_ + i] - o[i]) * (states_[(n + 1) * m_ + i] - o[i]);
            }
        }
        return sum / static_cast<double>(observations() * m_);
    }

    const Data& d_;
    std::size_t m_;                                   // values per block: K x D
    std::array<PullbackWorkspace<Net, double>, 4> ws_;  // one per RK4 stage of the step being pulled back
    std::vector<double> states_;                      // u_0 ... u_steps, K x D each
    std::array<std::vector<double>, 4> k_, kbar_;
    std::vector<double> s_, ubar_, sbar_;
};

void write_csv(const std::string& path, const Data& d, std::span<const double> p, NeuralODE& model, std::size_t steps) {
    std::vector<double> fit;
    model.trajectories(p, steps, fit);
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write the CSV file " + path);
    std::fprintf(f, "trajectory,t,train,x_true,y_true,x_obs,y_obs,x_fit,y_fit\n");
    const std::size_t K = d.trajectories;
    for (std::size_t r = 0; r < K; ++r)
        for (std::size_t n = 0; n <= steps; n += d.obs_every) {
            const std::size_t j = n / d.obs_every;
            const double* tr = &d.truth[(j * K + r) * D];
            const double* ob = &d.observed[(j * K + r) * D];
            const double* fi = &fit[(n * K + r) * D];
            std::fprintf(f, "%zu,%.4f,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", r, static_cast<double>(n) * d.h,
                         n <= d.steps ? 1 : 0, tr[0], tr[1], ob[0], ob[1], fi[0], fi[1]);
        }
    if (std::fclose(f) != 0) throw std::runtime_error("error writing the CSV file " + path);
}

// The discrete adjoint against central differences of the loss, on `count` random parameters.
int check_gradient(NeuralODE& model, std::vector<double> p, std::size_t count, std::uint64_t seed) {
    std::vector<double> g(p.size());
    model.loss_and_gradient(p, g);
    Rng rng(seed + 7);
    double worst = 0, largest = 0;
    for (double v : g) largest = std::max(largest, std::abs(v));
    for (std::size_t c = 0; c < count; ++c) {
        const std::size_t j = rng.below(p.size());
        const double keep = p[j], step = 1e-6 * std::max(1.0, std::abs(keep));
        p[j] = keep + step;
        const double up = model.loss(p);
        p[j] = keep - step;
        const double down = model.loss(p);
        p[j] = keep;
        const double fd = (up - down) / (2 * step);
        // relative to the component, floored at 1e-4 of the largest (rounding noise in tiny ones)
        worst = std::max(worst, std::abs(g[j] - fd) / std::max(std::abs(fd), 1e-4 * largest));
    }
    std::printf("gradient_check components=%zu max_rel_error=%.3e\n", count, worst);
    return worst < 1e-5 ? 0 : 1;
}

// How well the network learned the interaction: RMS of NN(u) - (-beta x y, delta x y) over the noise-free
// states of the training window, relative to the RMS of the true term.
double interaction_error(const Data& d, const std::vector<double>& p) {
    const std::size_t rows = (d.steps / d.obs_every + 1) * d.trajectories;
    const std::span<const double> u(d.truth.data(), rows * D);
    std::vector<double> nn(rows * D);
    predict<Net>(p, u, nn);
    double err = 0, ref = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        const double x = u[r * D], y = u[r * D + 1], t0 = -beta * x * y, t1 = delta * x * y;
        err += (nn[r * D] - t0) * (nn[r * D] - t0) + (nn[r * D + 1] - t1) * (nn[r * D + 1] - t1);
        ref += t0 * t0 + t1 * t1;
    }
    return std::sqrt(err / ref);
}


}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"A universal differential equation: the unknown interaction term of a Lotka-Volterra system learnt "
                 "from noisy trajectories, through RK4 and chainlet's pullbacks.", "neural_ode"};
    examples::show_defaults(app);
    std::uint64_t iterations = 10000, seed = 1, check = 0;
    std::string optimizer = "adam", csv = "neural_ode.csv";
    double lr = 0.03, noise = 0.02;
    app.add_option("--iterations", iterations, "Adam steps or L-BFGS iterations")->check(examples::whole(1, 10000000));
    app.add_option("--optimizer", optimizer, "adam or lbfgs (chainlet/optim/lbfgs.hpp)")
        ->check(CLI::IsMember({"adam", "lbfgs"}));
    app.add_option("--seed", seed, "seed of the data, its noise and the initial parameters")
        ->check(examples::whole(0, UINT64_MAX));
    app.add_option("--lr", lr, "Adam's learning rate (decayed to 1/10 over the run)")->check(examples::real(1e-8, 1.0));
    app.add_option("--check-gradient", check, "compare N gradient components with central differences, then exit")
        ->check(examples::whole(0, 1000000));
    app.add_option("--noise", noise, "standard deviation of the observation noise")->check(examples::real(0.0, 1.0));
    app.add_option("--csv", csv, "fitted vs true trajectories");
    if (const int status = examples::parse(app, argc, argv); status >= 0) return status;

    // 4 trajectories over t in [0, 4]: 80 RK4 steps of 0.05, observed every 2 steps (40 observations each).
    constexpr std::size_t K = 4, steps = 80, obs_every = 2, extra = 40;
    constexpr double h = 0.05;
    const Data data = make_data(K, steps, obs_every, h, extra, noise, seed);
    NeuralODE model(data);

    std::vector<double> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, seed);
    // Start the network near zero so the initial model is the known part alone (a common UDE choice:
    // the correction grows from nothing instead of from a random field).
    for (std::size_t j = Net::param_offset[2]; j < Net::num_params; ++j) p[j] *= 0.1;
    if (check > 0) return check_gradient(model, p, check, seed);
    const double initial = model.loss(p);
    std::printf("neural ODE: Lotka-Volterra, %zu trajectories x %zu RK4 steps (h = %g), %zu parameters, %s\n", K, steps,
                h, Net::num_params, optimizer.c_str());
    std::printf("iteration 0  loss %.6e\n", initial);

    const std::size_t every = std::max<std::size_t>(1, iterations / 20);
    std::size_t done = 0;
    const auto t0 = std::chrono::steady_clock::now();
    if (optimizer == "adam") {
        Adam<double> opt(lr);
        opt.init(p.size());
        for (std::size_t it = 1; it <= iterations; ++it) {
            // learning rate decays geometrically from lr to lr / 10
            opt.set_learning_rate(lr * std::pow(0.1, static_cast<double>(it - 1) / static_cast<double>(iterations)));
            const double l = model.loss_and_gradient(p, g);
            if (!std::isfinite(l)) throw std::runtime_error("the loss became non-finite at iteration " + std::to_string(it));
            opt.step(std::span<double>(p), std::span<const double>(g));
            if (it % every == 0 || it == 1) std::printf("iteration %zu  loss %.6e\n", it, l), std::fflush(stdout);
            ++done;
        }
    } else {
        LBFGS<double> lbfgs({.max_iterations = iterations, .gradient_tolerance = 1e-10});
        const MinimizeResult r = lbfgs.minimize(
            std::span<double>(p),
            [&](std::span<const double> at, std::span<double> grad) { return model.loss_and_gradient(at, grad); },
            [&](const MinimizeIteration& it) {
                if (it.iteration == 1 || it.iteration % every == 0)
                    std::printf("iteration %zu  loss %.6e  (%zu evaluations)\n", it.iteration, it.loss, it.evaluations),
                        std::fflush(stdout);
                return false;
            });
        std::printf("L-BFGS stopped after %zu iterations, %zu evaluations: %s\n", r.iterations, r.evaluations,
                    to_string(r.stop));
        done = r.iterations;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double final_loss = model.loss(p);
    write_csv(csv, data, p, model, steps + extra);
    std::printf("wrote %s\n", csv.c_str());
    std::printf("interaction_rel_error=%.4f (RMS of NN(u) - (-beta x y, delta x y) over the true states, relative)\n",
                interaction_error(data, p));
    std::printf("initial_loss=%.6e final_loss=%.6e reduction=%.1f us_per_iteration=%.2f\n", initial, final_loss,
                initial / final_loss, 1e6 * seconds / static_cast<double>(std::max<std::size_t>(done, 1)));
    return 0;
}
