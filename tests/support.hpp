// Helpers shared by the tests: reproducible random data and finite-difference gradient checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "chainlet/random.hpp"

namespace test {

template <class T = double>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    chainlet::Rng rng(seed);
    std::vector<T> v(n);
    for (auto& e : v) e = static_cast<T>(scale * rng.normal());
    return v;
}

// Largest error of g against central differences of f at p, each relative to
// max(|fd_i|, floor, 1e-3 max_j |fd_j|): the last term keeps rounding noise in components that are tiny
// next to the largest ones from counting as an error.
template <class F>
double gradient_error(F&& f, std::vector<double> p, const std::vector<double>& g, double h = 1e-5,
                      double floor = 1e-3) {
    std::vector<double> fd(p.size());
    double largest = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double keep = p[i];
        p[i] = keep + h;
        const double up = f(p);
        p[i] = keep - h;
        const double down = f(p);
        p[i] = keep;
        fd[i] = (up - down) / (2 * h);
        largest = std::max(largest, std::abs(fd[i]));
    }
    double worst = 0;
    for (std::size_t i = 0; i < p.size(); ++i)
        worst = std::max(worst, std::abs(g[i] - fd[i]) / std::max({std::abs(fd[i]), floor, 1e-3 * largest}));
    return worst;
}

// Largest elementwise difference relative to max(|reference|, 1).
template <class A, class B>
double max_rel_diff(const A& a, const B& ref) {
    double worst = 0;
    for (std::size_t i = 0; i < ref.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(a[i]) - static_cast<double>(ref[i])) /
                                    std::max(std::abs(static_cast<double>(ref[i])), 1.0));
    return worst;
}

// Finite-difference check of a bound layer L in double on a chunk of n samples, through
// f(p, x) = sum(w .* forward(p, x)) for a random cotangent w. Returns the worst error over the
// parameter gradient and the input gradient.
template <class L>
double layer_gradient_error(std::size_t n, std::uint64_t seed) {
    auto p = random_vector(L::num_params, seed, 0.5);
    auto x = random_vector(L::in_size * n, seed + 1);
    const auto w = random_vector(L::out_size * n, seed + 2);
    std::vector<double> y(L::out_size * n), aux(std::max<std::size_t>(L::aux_per_sample * n, 1));
    auto f = [&](const std::vector<double>& pp, const std::vector<double>& xx) {
        std::vector<double> yy(L::out_size * n), a(aux.size());
        L::forward(pp.data(), xx.data(), yy.data(), a.data(), n);
        double s = 0;
        for (std::size_t i = 0; i < yy.size(); ++i) s += w[i] * yy[i];
        return s;
    };
    L::forward(p.data(), x.data(), y.data(), aux.data(), n);
    std::vector<double> g(L::num_params, 0.0), dx(L::in_size * n), dy = w;
    L::pullback(p.data(), g.data(), x.data(), y.data(), aux.data(), dy.data(), dx.data(), n);
    const double ep = gradient_error([&](const std::vector<double>& pp) { return f(pp, x); }, p, g);
    const double ex = gradient_error([&](const std::vector<double>& xx) { return f(p, xx); }, x, dx);
    return std::max(ep, ex);
}

}  // namespace test
