// Glorot initialisation: reproducible from the seed, biases zero, weights with the Glorot variance.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/chainlet.hpp"

namespace test_init {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
using Net = Chain<Input<200>, Dense<300, Tanh>, DenseNoBias<100>>;

TEST_CASE("init_params: same seed, same parameters, other seed, other parameters", "[init]") {
    std::vector<float> a(Net::num_params), b(Net::num_params), c(Net::num_params);
    init_params<Net>(a, 42);
    init_params<Net>(b, 42);
    init_params<Net>(c, 43);
    REQUIRE(a == b);
    REQUIRE(a != c);
}

TEST_CASE("init_params: Glorot variance 2 / (fan_in + fan_out), zero biases", "[init]") {
    for (auto kind : {InitKind::glorot_uniform, InitKind::glorot_normal}) {
        std::vector<double> p(Net::num_params);
        init_params<Net>(p, 7, kind);
        double s = 0, s2 = 0, lim = 0;
        const std::size_t nw = 200 * 300;
        for (std::size_t i = 0; i < nw; ++i) {
            s += p[i];
            s2 += p[i] * p[i];
            lim = std::max(lim, std::abs(p[i]));
        }
        const double var = s2 / nw - (s / nw) * (s / nw);
        REQUIRE(std::abs(s / nw) < 0.002);
        REQUIRE(var == Approx(2.0 / 500).epsilon(0.03));
        if (kind == InitKind::glorot_uniform) REQUIRE(lim <= std::sqrt(6.0 / 500));
        for (std::size_t i = nw; i < nw + 300; ++i) REQUIRE(p[i] == 0.0);
        double s2b = 0;  // second layer: no bias, fan 400
        for (std::size_t i = nw + 300; i < Net::num_params; ++i) s2b += p[i] * p[i];
        REQUIRE(s2b / (300 * 100) == Approx(2.0 / 400).epsilon(0.05));
    }
}

}  // namespace test_init
