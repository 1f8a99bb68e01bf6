// Uses chainlet as an outside project would: fits y = sin(x0) - x1 / 2 with a tiny tanh MLP in
// double for a few full-batch Adam steps, then prints one checkable line:
//   consumer: params=<n> initial_loss=<v> final_loss=<v> prediction=<v> target=<v>
// (the installed-package test checks that final_loss < initial_loss and that params is 65).
#include <chainlet/chainlet.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<16, chainlet::Tanh>, chainlet::Dense<1>>;

int main() {
    constexpr std::size_t n = 256;
    std::vector<double> x(2 * n), y(n);
    chainlet::Rng rng(7);
    for (std::size_t s = 0; s < n; ++s) {
        x[2 * s] = 4 * rng.uniform() - 2;
        x[2 * s + 1] = 4 * rng.uniform() - 2;
        y[s] = std::sin(x[2 * s]) - 0.5 * x[2 * s + 1];
    }
    std::vector<double> p(Net::num_params), g(Net::num_params);
    chainlet::init_params<Net>(p, 1);
    const double initial = chainlet::value_and_gradient<Net>(p, g, x, y, chainlet::SquaredError{});

    chainlet::Adam opt(0.02);
    chainlet::fit<Net>(p, chainlet::SquaredError{}, x, y, opt, {.epochs = 200, .batch = 0, .threads = 1});
    const double final_loss = chainlet::value_and_gradient<Net>(p, g, x, y, chainlet::SquaredError{});

    const std::vector<double> probe = {0.5, 1.0};
    std::vector<double> out(1);
    chainlet::predict<Net>(p, probe, out);
    std::printf("consumer: %s\n", chainlet::build_report().c_str());  // from the compiled library
    std::printf("consumer: params=%zu initial_loss=%.6g final_loss=%.6g prediction=%.4f target=%.4f\n",
                Net::num_params, initial, final_loss, out[0], std::sin(0.5) - 0.5);
    return final_loss < initial ? 0 : 1;
}
