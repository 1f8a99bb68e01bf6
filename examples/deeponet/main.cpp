// DeepONet (Lu et al. 2021) learning the antiderivative operator G(u)(y) = integral_0^y u(s) ds on [0, 1].
//
// Functions: u(s) = sum_{k=1..K} (a_k sin(k pi s) + b_k cos(k pi s)) / k with a_k, b_k ~ N(0, 1): smooth,
// random, with exact antiderivatives (1 - cos(k pi y)) / (k pi) and sin(k pi y) / (k pi). A sample is
// (u at 100 equispaced sensors, y) -> G(u)(y). The branch net reads the sensors, the trunk net y, and
// the output is the dot product of their 40 outputs plus a bias (a Dense<1> after Parallel<Dot>).
//
// Reports the relative L2 error on unseen functions, ||G_pred - G|| / ||G|| over all test points, and
// writes predictions for examples/deeponet/plot.py (docs/deeponet.png).
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/checksum.hpp"
#include "common/args.hpp"
#include "common/progress.hpp"

using namespace chainlet;

constexpr std::size_t sensors = 100, width = 40;
using DeepONet = Chain<Input<sensors + 1>,
                       Parallel<Dot, Branch<Slice<0, sensors>, Dense<width, Tanh>, Dense<width, Tanh>, Dense<width>>,
                                Branch<Slice<sensors, 1>, Dense<width, Tanh>, Dense<width, Tanh>, Dense<width, Tanh>>>,
                       Dense<1>>;

namespace {

constexpr std::size_t modes = 6;

// One random function: its coefficients, its values at the sensors, and G(u) at any y.
struct Function {
    std::vector<double> a, b;
    explicit Function(Rng& rng) : a(modes), b(modes) {
        for (std::size_t k = 0; k < modes; ++k) a[k] = rng.normal(), b[k] = rng.normal();
    }
    double u(double s) const {
        double v = 0;
        for (std::size_t k = 1; k <= modes; ++k)
            v += (a[k - 1] * std::sin(k * std::numbers::pi * s) + b[k - 1] * std::cos(k * std::numbers::pi * s)) / k;
        return v;
    }
    double antiderivative(double y) const {
        double v = 0;
        for (std::size_t k = 1; k <= modes; ++k) {
            const double w = k * std::numbers::pi;
            v += (a[k - 1] * (1 - std::cos(w * y)) + b[k - 1] * std::sin(w * y)) / (w * k);
        }
        return v;
    }
};

// points_per_function samples per function: y uniform in [0, 1] (or on a grid when grid is true).
void make_data(std::size_t functions, std::size_t points, bool grid, Rng& rng, std::vector<float>& x,
               std::vector<float>& t, std::vector<Function>* keep = nullptr) {
    x.clear(), t.clear();
    for (std::size_t f = 0; f < functions; ++f) {
        const Function fn(rng);
        std::vector<float> sensor(sensors);
        for (std::size_t i = 0; i < sensors; ++i) sensor[i] = static_cast<float>(fn.u(i / double(sensors - 1)));
        for (std::size_t j = 0; j < points; ++j) {
            const double y = grid ? j / double(points - 1) : rng.uniform();
            x.insert(x.end(), sensor.begin(), sensor.end());
            x.push_back(static_cast<float>(y));
            t.push_back(static_cast<float>(fn.antiderivative(y)));
        }
        if (keep) keep->push_back(fn);
    }
}

double relative_l2(const std::vector<float>& pred, const std::vector<float>& truth) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < truth.size(); ++i) {
        num += (double(pred[i]) - truth[i]) * (double(pred[i]) - truth[i]);
        den += double(truth[i]) * truth[i];
    }
    return std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"DeepONet learning the antiderivative operator G(u)(y) = integral_0^y u(s) ds from 100 sensor values "
                 "of random smooth u.", "deeponet"};
    examples::show_defaults(app);
    std::uint64_t epochs = 300, functions = 4000, points = 10, test_functions = 200, batch = 256, seed = 1;
    int threads = 0;
    double lr = 1e-3;
    std::string out = "deeponet_predictions.csv";
    app.add_option("--epochs", epochs, "passes over the training set")->check(examples::whole(1, 1000000));
    app.add_option("--functions", functions, "training functions u")->check(examples::whole(1, 10000000));
    app.add_option("--points", points, "random y per training function")->check(examples::whole(1, 100000));
    app.add_option("--test-functions", test_functions, "unseen test functions (each on 101 y)")->check(examples::whole(1, 1000000));
    app.add_option("--batch", batch, "samples per Adam step")->check(examples::whole(1, 100000000));
    app.add_option("--lr", lr, "Adam learning rate (halved at 50 %, 75 % and 90 % of the epochs)")->check(examples::real(1e-8, 1));
    app.add_option("--threads", threads, "OpenMP threads, 0 = all cores")->check(examples::whole(0, 1024));
    app.add_option("--seed", seed, "seed of the data and the initial parameters")->check(examples::whole(0, UINT64_MAX));
    app.add_option("--out", out, "CSV of test predictions for plot.py");
    if (const int status = examples::parse(app, argc, argv); status >= 0) return status;

    std::printf("%s\n", build_report().c_str());
    Rng rng(seed);
    std::vector<float> x, t, xt, tt;
    std::vector<Function> test_fns;
    make_data(functions, points, false, rng, x, t);
    make_data(test_functions, 101, true, rng, xt, tt, &test_fns);
    std::printf("DeepONet: %zu parameters, %zu training samples (%zu functions x %zu points), %zu test samples\n",
                DeepONet::num_params, t.size(), std::size_t(functions), std::size_t(points), tt.size());

    std::vector<float> p(DeepONet::num_params), pred(tt.size());
    init_params<DeepONet>(p, seed);
    Adam opt(static_cast<float>(lr));
    examples::Progress progress;
    FitOptions o;
    o.epochs = epochs;
    o.batch = batch;
    o.seed = seed;
    o.threads = threads;
    o.on_step = [&](const StepInfo& s) { progress.update(s.epoch, s.step, s.steps_per_epoch, s.loss); };
    const std::size_t every = std::max<std::size_t>(1, epochs / 10);
    o.on_epoch = [&](const EpochInfo& e) {
        for (double at : {0.5, 0.75, 0.9})
            if (e.epoch == static_cast<std::size_t>(at * static_cast<double>(e.epochs)))
                opt.set_learning_rate(opt.learning_rate() / 2);
        if (e.epoch % every == 0 || e.epoch == e.epochs) {
            progress.finish();
            predict<DeepONet>(p, xt, pred, threads);
            std::printf("epoch %zu/%zu  train loss %.3e  test rel. L2 error %.4f\n", e.epoch, e.epochs, e.loss,
                        relative_l2(pred, tt));
            std::fflush(stdout);
        }
    };
    const FitResult r = fit<DeepONet>(p, SquaredError{}, x, t, opt, o);
    progress.finish();

    predict<DeepONet>(p, xt, pred, threads);
    const double error = relative_l2(pred, tt);
    std::ofstream csv(out);
    csv << "function,y,u,G,prediction\n";
    for (std::size_t f = 0; f < std::min<std::size_t>(test_functions, 4); ++f)
        for (std::size_t j = 0; j < 101; ++j) {
            const double y = j / 100.0;
            csv << f << "," << y << "," << test_fns[f].u(y) << "," << tt[f * 101 + j] << "," << pred[f * 101 + j] << "\n";
        }
    std::printf("wrote %s\n", out.c_str());
    std::printf("rel_l2_error=%.5f seconds=%.1f checksum=%016" PRIx64 "\n", error, r.seconds,
                checksum(std::span<const float>(p)));
    return 0;
}
