// A GRU surrogate of a forced, damped pendulum: from the last 50 observed states it predicts the next.
//
//   theta'' = -gamma theta' - omega0^2 sin(theta) + A cos(Omega t)
//
// Trajectories (random initial angle and velocity, random forcing amplitude A per trajectory) are
// integrated with RK4 (10 steps per observation) and observed every dt = 0.1. A sample is a window of 50
// observations of (theta, theta', A cos(Omega t)) — the forcing is a known input — and its target the
// state one observation later, learnt as the scaled increment (s_{t+1} - s_t) / dt so that the network
// predicts a quantity of order one. Model: Input<50, 3> -> GRU<32> -> Dense<2>, trained with fit + Adam on
// training trajectories; test trajectories never seen in training give the test error, against the
// persistence baseline (next state = last state). The model is also run closed loop on one test
// trajectory, each prediction fed back as the newest observation, and the CSV (plot.py turns it into a
// PNG) holds the truth, the one-step predictions and that rollout.
//
// Ends with `test_rmse=<v> persistence_rmse=<v> rollout_rmse=<v> seconds=<v> checksum=<hex>`.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/checksum.hpp"
#include "common/args.hpp"
#include "common/progress.hpp"

using namespace chainlet;

namespace {

constexpr std::size_t window = 50, features = 3, state = 2;
using Net = Chain<Input<window, features>, GRU<32>, Dense<state>>;

constexpr double gamma_ = 0.3, omega0_sq = 1.0, Omega = 0.9;  // damping, natural frequency^2, forcing frequency
constexpr double dt = 0.1;                                      // between observations
constexpr int substeps = 10;                                    // RK4 steps per observation

struct Trajectory {
    double amplitude;
    std::vector<double> theta, omega;  // at t = k dt
    double forcing(std::size_t k) const { return amplitude * std::cos(Omega * dt * static_cast<double>(k)); }
};

// RK4 of (theta, omega)' = (omega, -gamma omega - omega0^2 sin theta + A cos(Omega t)).
Trajectory simulate(std::size_t observations, Rng& rng) {
    Trajectory tr;
    tr.amplitude = 0.2 + 0.8 * rng.uniform();
    double th = 2 * rng.uniform() - 1, om = 2 * rng.uniform() - 1, t = 0;
    auto f = [&](double tt, double a, double b, double& da, double& db) {
        da = b;
        db = -gamma_ * b - omega0_sq * std::sin(a) + tr.amplitude * std::cos(Omega * tt);
    };
    const double h = dt / substeps;
    for (std::size_t k = 0; k < observations; ++k) {
        tr.theta.push_back(th);
        tr.omega.push_back(om);
        for (int i = 0; i < substeps; ++i) {
            double a1, b1, a2, b2, a3, b3, a4, b4;
            f(t, th, om, a1, b1);
            f(t + h / 2, th + h / 2 * a1, om + h / 2 * b1, a2, b2);
            f(t + h / 2, th + h / 2 * a2, om + h / 2 * b2, a3, b3);
            f(t + h, th + h * a3, om + h * b3, a4, b4);
            th += h / 6 * (a1 + 2 * a2 + 2 * a3 + a4);
            om += h / 6 * (b1 + 2 * b2 + 2 * b3 + b4);
            t += h;
        }
    }
    return tr;
}

// One window ending at observation `last` (inclusive), (t, f) row-major, appended to x.
void append_window(const Trajectory& tr, std::size_t last, std::vector<float>& x) {
    for (std::size_t k = last + 1 - window; k <= last; ++k) {
        x.push_back(static_cast<float>(tr.theta[k]));
        x.push_back(static_cast<float>(tr.omega[k]));
        x.push_back(static_cast<float>(tr.forcing(k)));
    }
}

// Every window of every trajectory, with the scaled increment to the next observation as target.
void make_samples(const std::vector<Trajectory>& trs, std::vector<float>& x, std::vector<float>& y) {
    for (const auto& tr : trs)
        for (std::size_t last = window - 1; last + 1 < tr.theta.size(); ++last) {
            append_window(tr, last, x);
            y.push_back(static_cast<float>((tr.theta[last + 1] - tr.theta[last]) / dt));
            y.push_back(static_cast<float>((tr.omega[last + 1] - tr.omega[last]) / dt));
        }
}

// Root mean square error of the predicted next states (last state + dt * increment) over all samples and
// both components; with `persistence`, of the baseline that predicts no change.
double next_state_rmse(const std::vector<float>& increments, const std::vector<float>& y, bool persistence = false) {
    double sum = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
        const double err = dt * ((persistence ? 0.0 : static_cast<double>(increments[i])) - static_cast<double>(y[i]));
        sum += err * err;
    }
    return std::sqrt(sum / static_cast<double>(y.size()));
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"A GRU surrogate (Input<50, 3> -> GRU<32> -> Dense<2>) of a forced damped pendulum: predicts the next "
                 "state from the last 50, trained with Adam on RK4 trajectories.", "sequence"};
    examples::show_defaults(app);
    std::uint64_t epochs = 30, train_trajectories = 64, test_trajectories = 12, length = 250, batch = 64, seed = 1;
    double lr = 3e-3;
    int threads = 0;
    std::string csv = "sequence.csv";
    app.add_option("--epochs", epochs, "passes over the training windows")->check(examples::whole(1, 100000));
    app.add_option("--train-trajectories", train_trajectories, "training trajectories")->check(examples::whole(1, 100000));
    app.add_option("--test-trajectories", test_trajectories, "test trajectories (never trained on)")
        ->check(examples::whole(1, 100000));
    app.add_option("--length", length, "observations per trajectory (dt = 0.1); each gives length - 50 windows")
        ->check(examples::whole(window + 2, 1000000));
    app.add_option("--batch", batch, "samples per Adam step")->check(examples::whole(1, 1000000));
    app.add_option("--lr", lr, "Adam learning rate (divided by 10 for the last quarter of the epochs)")
        ->check(examples::real(1e-8, 1));
    app.add_option("--threads", threads, "OpenMP threads, 0 = all cores")->check(examples::whole(0, 1024));
    app.add_option("--seed", seed, "seed of the trajectories, the initial parameters and the shuffling")
        ->check(examples::whole(0, UINT64_MAX));
    app.add_option("--csv", csv, "where to write truth, one-step predictions and the closed-loop rollout");
    if (const int status = examples::parse(app, argc, argv); status >= 0) return status;

    std::printf("%s\n", build_report().c_str());
    Rng rng(seed);
    std::vector<Trajectory> train_set, test_set;
    for (std::uint64_t i = 0; i < train_trajectories; ++i) train_set.push_back(simulate(length, rng));
    for (std::uint64_t i = 0; i < test_trajectories; ++i) test_set.push_back(simulate(length, rng));
    std::vector<float> x, y, xt, yt;
    make_samples(train_set, x, y);
    make_samples(test_set, xt, yt);
    std::printf("%zu training windows, %zu test windows of %zu steps x %zu features; %zu parameters\n",
                y.size() / state, yt.size() / state, window, features, Net::num_params);

    std::vector<float> p(Net::num_params), pred(yt.size());
    init_params<Net>(p, seed);
    Adam opt(static_cast<float>(lr));
    FitOptions o;
    o.epochs = epochs;
    o.batch = batch;
    o.seed = seed;
    o.threads = threads;
    examples::Progress bar;
    o.on_step = [&](const StepInfo& s) { bar.update(s.epoch, s.step, s.steps_per_epoch, s.loss); };
    o.on_epoch = [&](const EpochInfo& e) {
        bar.finish();
        predict<Net>(p, xt, pred, threads);
        std::printf("epoch %zu/%zu  train loss %.5f  test next-state rmse %.5f  (%.1f s)\n", e.epoch, e.epochs, e.loss,
                    next_state_rmse(pred, yt), e.seconds);
        std::fflush(stdout);
        if (e.epoch == e.epochs - e.epochs / 4) opt.set_learning_rate(static_cast<float>(lr / 10));
    };
    const FitResult r = fit<Net>(p, SquaredError{}, x, y, opt, o);

    predict<Net>(p, xt, pred, threads);
    const double test_rmse = next_state_rmse(pred, yt), persistence_rmse = next_state_rmse(pred, yt, true);

    // The first test trajectory: one-step predictions from true windows, and a closed-loop rollout that
    // starts from its first true window and feeds every prediction back (the forcing stays known).
    const Trajectory& tr = test_set.front();
    std::vector<double> th_roll(tr.theta.begin(), tr.theta.begin() + window), om_roll(tr.omega.begin(), tr.omega.begin() + window);
    std::vector<float> win, inc(state);
    double roll_sq = 0;
    for (std::size_t last = window - 1; last + 1 < tr.theta.size(); ++last) {
        win.clear();
        for (std::size_t k = last + 1 - window; k <= last; ++k) {
            win.push_back(static_cast<float>(th_roll[k]));
            win.push_back(static_cast<float>(om_roll[k]));
            win.push_back(static_cast<float>(tr.forcing(k)));
        }
        predict<Net>(p, win, inc, 1);
        th_roll.push_back(th_roll[last] + dt * inc[0]);
        om_roll.push_back(om_roll[last] + dt * inc[1]);
        const double a = th_roll.back() - tr.theta[last + 1], b = om_roll.back() - tr.omega[last + 1];
        roll_sq += a * a + b * b;
    }
    const double rollout_rmse = std::sqrt(roll_sq / static_cast<double>(2 * (tr.theta.size() - window)));

    if (std::FILE* f = std::fopen(csv.c_str(), "w")) {
        std::fprintf(f, "t,theta_true,omega_true,forcing,theta_onestep,omega_onestep,theta_rollout,omega_rollout\n");
        for (std::size_t k = 0; k < tr.theta.size(); ++k) {
            const bool predicted = k >= window;  // pred holds the first test trajectory's windows first
            const double th1 = predicted ? tr.theta[k - 1] + dt * pred[(k - window) * state] : tr.theta[k];
            const double om1 = predicted ? tr.omega[k - 1] + dt * pred[(k - window) * state + 1] : tr.omega[k];
            std::fprintf(f, "%.3f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", dt * static_cast<double>(k), tr.theta[k],
                         tr.omega[k], tr.forcing(k), th1, om1, th_roll[k], om_roll[k]);
        }
        std::fclose(f);
        std::printf("wrote %s (plot: /usr/bin/python3 examples/sequence/plot.py %s docs/sequence.png)\n", csv.c_str(),
                    csv.c_str());
    } else {
        std::fprintf(stderr, "sequence: error: cannot write %s\n", csv.c_str());
        return 1;
    }

    std::printf("test_rmse=%.5f persistence_rmse=%.5f rollout_rmse=%.5f seconds=%.1f checksum=%016" PRIx64 "\n",
                test_rmse, persistence_rmse, rollout_rmse, r.seconds, checksum(std::span<const float>(p)));
    return 0;
}
