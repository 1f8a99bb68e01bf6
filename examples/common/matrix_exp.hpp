// The data of the SimpleChains.jl blog model (examples/tiny_mlp, examples/ensemble): the exponential
// of a 2x2 matrix, input its 4 entries drawn from N(0, 1), target the 4 entries of exp(A).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "chainlet/random.hpp"

namespace examples {

// exp(A) for A = [a b; c d] in closed form: with s = (a + d) / 2 and B = A - s I, B^2 = q I where
// q = ((a - d) / 2)^2 + b c, so exp(A) = e^s (C I + S B) with C = cosh(sqrt q), S = sinh(sqrt q) / sqrt q
// (cos and sin of sqrt(-q) when q < 0).
inline void expm2(const float* m, float* out) {
    const double a = m[0], b = m[1], c = m[2], d = m[3];
    const double s = (a + d) / 2, q = (a - d) * (a - d) / 4 + b * c;
    double C = 1, S = 1;
    if (q > 1e-12) {
        const double r = std::sqrt(q);
        C = std::cosh(r);
        S = std::sinh(r) / r;
    } else if (q < -1e-12) {
        const double r = std::sqrt(-q);
        C = std::cos(r);
        S = std::sin(r) / r;
    }
    const double e = std::exp(s);
    out[0] = static_cast<float>(e * (C + S * (a - s)));
    out[1] = static_cast<float>(e * S * b);
    out[2] = static_cast<float>(e * S * c);
    out[3] = static_cast<float>(e * (C + S * (d - s)));
}

// n samples: x (n rows of 4) from rng, y = exp of each row read as a 2x2 matrix.
inline void make_matrix_exp_data(std::size_t n, chainlet::Rng& rng, std::vector<float>& x, std::vector<float>& y) {
    x.resize(4 * n);
    y.resize(4 * n);
    for (auto& v : x) v = static_cast<float>(rng.normal());
    for (std::size_t s = 0; s < n; ++s) expm2(&x[4 * s], &y[4 * s]);
}

}  // namespace examples
