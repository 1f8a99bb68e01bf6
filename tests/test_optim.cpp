// Optimisers against values worked out by hand (two steps from p = (1, -2) with gradients
// (0.5, -0.25) then (-1, 0.75), lr 0.1), in double.
//   SGD, momentum 0.9:  v1 = g1, p1 = p0 - 0.1 v1 = (0.95, -1.975);
//                       v2 = 0.9 v1 + g2 = (-0.55, 0.525), p2 = (1.005, -2.0275)
//   Adam step 1:        m = 0.1 g1, v = 0.001 g1^2, bias-corrected m/sqrt(v) = sign(g1)
//                       p1 = p0 - 0.1 * g1 / (|g1| + 1e-8) = (0.900000002, -1.900000004)
//   Adam step 2:        m = (-0.055, 0.0525), v = (0.00124975, 0.000624...), etc.
//   AdamW (wd 0.1):     each step first scales p by 1 - 0.1 * 0.1.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "chainlet/optim/adam.hpp"
#include "chainlet/optim/sgd.hpp"

namespace test_optim {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

namespace {
template <class Opt>
std::vector<std::vector<double>> two_steps(Opt opt) {
    std::vector<double> p = {1.0, -2.0};
    std::vector<std::vector<double>> out;
    for (const std::vector<double>& g : {std::vector<double>{0.5, -0.25}, std::vector<double>{-1.0, 0.75}}) {
        opt.step(p, g);
        out.push_back(p);
    }
    return out;
}
void require_close(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want) {
    for (std::size_t s = 0; s < want.size(); ++s)
        for (std::size_t i = 0; i < want[s].size(); ++i) REQUIRE(got[s][i] == Approx(want[s][i]).epsilon(1e-14));
}
}  // namespace

TEST_CASE("SGD with momentum: two steps", "[optim]") {
    require_close(two_steps(SGD<double>(0.1, 0.9)), {{0.95, -1.975}, {1.005, -2.0275}});
}

TEST_CASE("Adam: two steps", "[optim]") {
    require_close(two_steps(Adam<double>(0.1)),
                  {{0.900000002, -1.900000004}, {0.9366103542405654, -1.9494189864458513}});
}

TEST_CASE("AdamW: two steps", "[optim]") {
    require_close(two_steps(AdamW<double>(0.1, 0.1)),
                  {{0.890000002, -1.880000004}, {0.9177103542205653, -1.9106189864058514}});
}

TEST_CASE("AdamW: the SIMD update equals the plain formula on an odd length (float)", "[optim][kernel]") {
    const std::size_t n = 37;
    std::vector<float> p(n), g(n);
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = 0.1f * static_cast<float>(i) - 1.0f;
        g[i] = std::sin(static_cast<float>(i));
    }
    std::vector<double> pr(p.begin(), p.end()), m(n, 0.0), v(n, 0.0);
    AdamW<float> opt(0.01f, 0.1f);
    for (int t = 1; t <= 3; ++t) {
        opt.step(p, g);
        for (std::size_t i = 0; i < n; ++i) {
            pr[i] *= 1 - 0.01 * 0.1;
            m[i] = 0.9 * m[i] + 0.1 * g[i];
            v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
            pr[i] -= 0.01 * (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-8);
        }
        for (std::size_t i = 0; i < n; ++i) REQUIRE(p[i] == Approx(pr[i]).epsilon(1e-5).margin(1e-6));
    }
}

// A zero gradient decays the moments geometrically; once they would be subnormal they are stored as zero
// (slow microcode assists on Intel otherwise), while small normal moments keep decaying. 37 lanes: the
// vector loop and the scalar tail.
TEMPLATE_TEST_CASE("Adam: moments that decay below the normal range become zero, normal ones are kept", "[optim][kernel]",
                   float, double) {
    using T = TestType;
    const std::size_t n = 37;
    const T tiny = std::numeric_limits<T>::min();
    std::vector<T> m(n), v(n), p(n), g(n, T(0));
    for (std::size_t i = 0; i < n; ++i) {
        const bool flushed = i % 2 == 0;  // after one step: 0.9 * 1.05 and 0.999 * 1.0005 are below 1
        m[i] = (flushed ? T(1.05) : T(1e6)) * tiny * (i % 3 == 0 ? T(-1) : T(1));
        v[i] = (flushed ? T(1.0005) : T(1e6)) * tiny;
        p[i] = T(0.25) * static_cast<T>(i) - T(3);
    }
    Adam<T> opt(T(0.01));
    opt.set_state(m, v, 5);
    const std::vector<T> p0 = p;
    opt.step(p, g);
    for (std::size_t i = 0; i < n; ++i) {
        CAPTURE(i);
        if (i % 2 == 0) {
            REQUIRE(opt.first_moment()[i] == T(0));
            REQUIRE(opt.second_moment()[i] == T(0));
            REQUIRE(p[i] == p0[i]);  // m = 0: no step, Adam has no decay
        } else {
            REQUIRE(opt.first_moment()[i] == T(0.9) * m[i]);
            REQUIRE(opt.second_moment()[i] == T(0.999) * v[i]);
        }
    }
}

// SGD's velocity likewise: with a zero gradient, 0.9 times a velocity just above the normal range is below
// it and becomes zero (no step); a small normal velocity decays by the momentum.
TEMPLATE_TEST_CASE("SGD with momentum: a velocity that decays below the normal range becomes zero", "[optim]", float,
                   double) {
    using T = TestType;
    const T tiny = std::numeric_limits<T>::min();
    std::vector<T> v = {T(1.05) * tiny, -T(1.05) * tiny, T(1e6) * tiny}, p = {T(1), T(-2), T(3)}, g(3, T(0));
    SGD<T> opt(T(0.1), T(0.9));
    opt.set_velocity(v);
    opt.step(p, g);
    REQUIRE(opt.velocity()[0] == T(0));
    REQUIRE(opt.velocity()[1] == T(0));
    REQUIRE(opt.velocity()[2] == T(0.9) * v[2]);
    REQUIRE(p[0] == T(1));
    REQUIRE(p[1] == T(-2));
}

TEST_CASE("Optimisers: CTAD from the learning rate, errors for bad settings and sizes", "[optim][errors]") {
    Adam opt(3e-4f);
    STATIC_REQUIRE(std::is_same_v<decltype(opt), Adam<float>>);
    REQUIRE_THROWS(Adam<float>(-1.0f));
    REQUIRE_THROWS(SGD<float>(0.1f, 1.5f));
    std::vector<float> p(3), g(2);
    REQUIRE_THROWS_WITH(opt.step(p, g), Catch::Contains("3 parameters but 2 gradients"));
}

}  // namespace test_optim
