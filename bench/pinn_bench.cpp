// The PINN Adam step of issue 14, timed: 2-D Poisson, MLP 2-32-32-32-1 tanh, 1,024 interior points
// (u, grad u and the Laplacian through derivatives/taylor.hpp) + 256 boundary points (u), loss
// mean (Lap u + f)^2 + mean u^2, its parameter gradient, one Adam update. float and double, 1 and 2
// threads. FLOPs: the matrix products of the pass and its pullback (2 in out per column per layer
// forward; the weight gradient and, except for the first layer, the input cotangent backward); the
// elementwise work (activation jets) is not counted. The peak is the measured fp32 FMA peak
// (bench/fma_peak.hpp); double's is half of it (half the lanes).
//   usage: pinn_bench [--steps N] [--repeats R]      (prints one line per configuration, then JSON)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>
#include <numbers>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "fma_peak.hpp"

using namespace chainlet;
using Net = Chain<Input<2>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<1>>;

namespace {

double pass_flops(std::size_t columns, std::size_t n) {
    double f = 0;
    for (std::size_t l = 0; l < Net::num_layers; ++l) {
        const double mm = 2.0 * static_cast<double>(Net::width[l] * Net::width[l + 1] * columns * n);
        f += mm * (l == 0 ? 2 : 3);
    }
    return f;
}

// Process CPU time: on a shared machine a neighbour's load stretches wall time, much less CPU time
// (with 1 thread; with 2 it sums both threads).
double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// {wall, cpu} seconds per step, each the best of the repeats.
template <class T>
std::pair<double, double> step_seconds(int threads, std::size_t steps, int repeats) {
    const std::size_t ni = 1024, nb = 256;
    Rng rng(1);
    std::vector<T> xi(2 * ni), xb(2 * nb), f(ni);
    for (auto& v : xi) v = static_cast<T>(rng.uniform());
    for (std::size_t s = 0; s < nb; ++s) {
        const double r = rng.uniform();
        const int side = static_cast<int>(s % 4);
        xb[2 * s] = static_cast<T>(side == 0 ? r : side == 1 ? 0.0 : side == 2 ? 1.0 : r);
        xb[2 * s + 1] = static_cast<T>(side == 0 ? 0.0 : side == 3 ? 1.0 : r);
    }
    const double pi = std::numbers::pi;
    for (std::size_t s = 0; s < ni; ++s)
        f[s] = static_cast<T>(2 * pi * pi * std::sin(pi * xi[2 * s]) * std::sin(pi * xi[2 * s + 1]));
    struct MinusF {
        const T* f;
        T operator()(const T*, std::size_t s) const { return -f[s]; }
    };
    struct Zero {
        T operator()(const T*, std::size_t) const { return T(0); }
    };
    const auto interior = linear_residual<T>({}, {T(1)}, MinusF{f.data()});
    const auto boundary = linear_residual<T>({}, {}, Zero{}, T(1));
    DerivativeWorkspace<Net, T> wi(DerivativeSpec::laplacian(2), ni, threads), wb(DerivativeSpec::value(), nb, threads);
    std::vector<T> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, 1);
    Adam<T> opt(T(1e-3));
    opt.init(p.size());
    auto step = [&] {
        std::fill(g.begin(), g.end(), T(0));
        wi.add_value_and_gradient(p.data(), g.data(), xi.data(), ni, interior, T(1), threads);
        wb.add_value_and_gradient(p.data(), g.data(), xb.data(), nb, boundary, T(1), threads);
        opt.step(std::span<T>(p), std::span<const T>(g));
    };
    for (int i = 0; i < 20; ++i) step();
    double best = 1e30, cpu_best = 1e30;
    for (int r = 0; r < repeats; ++r) {
        const double c0 = cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < steps; ++i) step();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                                  static_cast<double>(steps));
        cpu_best = std::min(cpu_best, (cpu_seconds() - c0) / static_cast<double>(steps));
    }
    return {best, cpu_best};
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t steps = 200;
    int repeats = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--steps")) steps = std::stoul(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--repeats")) repeats = std::stoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: pinn_bench [--steps N] [--repeats R]\n");
            return 2;
        }
    }
    const double flops = pass_flops(4, 1024) + pass_flops(1, 256);
    std::printf("PINN Poisson Adam step, %s, %.1f MFLOP per step (matrix products), best of %d x %zu steps\n",
                simd::arch_name, flops / 1e6, repeats, steps);
    std::string json = "[";
    for (int threads : {1, 2}) {
        const double peak32 = bench::fma_peak_gflops(threads);
        for (int bits : {32, 64}) {
            const auto [s, cpu] = bits == 32 ? step_seconds<float>(threads, steps, repeats)
                                             : step_seconds<double>(threads, steps, repeats);
            const double peak = bits == 32 ? peak32 : peak32 / 2, gf = flops / s / 1e9;
            std::printf("chainlet float%d threads %d: %.3f ms per step (%.3f ms CPU), %.1f GFLOP/s, %.0f %% of the "
                        "measured fp%d FMA peak (%.0f GFLOP/s)\n",
                        bits, threads, 1e3 * s, 1e3 * cpu, gf, 100 * gf / peak, bits, peak);
            char row[256];
            std::snprintf(row, sizeof row,
                          "%s{\"system\": \"chainlet\", \"dtype\": \"float%d\", \"threads\": %d, \"ms_per_step\": %.4f, "
                          "\"cpu_ms_per_step\": %.4f, \"gflops\": %.2f, \"peak_fraction\": %.3f}",
                          json.size() > 1 ? ", " : "", bits, threads, 1e3 * s, 1e3 * cpu, gf, gf / peak);
            json += row;
        }
    }
    std::printf("%s]\n", json.c_str());
    return 0;
}
