// The input-derivative pass (derivatives/taylor.hpp) and the activations' jets it needs: every
// derivative against finite differences in double, the SIMD form against the scalar form on odd
// lengths, and the parameter gradient of a residual loss against finite differences, on MLPs and on
// chains with containers (Residual, Slice, Parallel of every combine, ActivationLayer). jvp, float
// against double, threads and allocation are in test_derivative_passes.cpp, the Hessian-vector product
// in test_hvp.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <type_traits>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "derivative_nets.hpp"
#include "support.hpp"

namespace test_input_derivatives {

using namespace chainlet;
using namespace test::derivative_nets;

namespace {

using LeakySlope02 = LeakyReLU<1, 5>;  // one macro argument
using Sin30 = Sin<30>;

template <class Act>
void jet_matches_finite_differences() {
    const auto z = test::random_vector(200, 17, 3.0);
    for (double zi : z) {
        if (std::abs(zi) < 1e-3) continue;  // the kink of ReLU
        const double h = 1e-5;
        const Jet<double> j = Act::jet(zi), up = Act::jet(zi + h), down = Act::jet(zi - h);
        INFO(Act::name << " z=" << zi);
        REQUIRE(j.value == Approx(Act::value(zi)).epsilon(1e-14).margin(1e-14));
        REQUIRE(j.d1 == Approx(Act::pullback(1.0, Act::derivative_from_output ? j.value : zi)).epsilon(1e-13).margin(1e-14));
        REQUIRE(j.d2 == Approx((up.d1 - down.d1) / (2 * h)).epsilon(1e-7).margin(1e-9));
        REQUIRE(j.d3 == Approx((up.d2 - down.d2) / (2 * h)).epsilon(1e-7).margin(1e-8));  // FD rounding ~1e-9
    }
}

template <class Act, class T>
void jet_vector_matches_scalar() {
    using V = simd::vec<T>;
    constexpr std::size_t W = simd::width<T>;
    for (std::size_t n : {1, 3, 7, 17, 33, 100}) {
        const auto z = test::random_vector<T>(n + W, n, 3.0);
        for (std::size_t i = 0; i + W <= n; i += W) {
            const Jet<V> j = Act::jet(simd::loadv<V>(&z[i]));
            T lanes[4][W];
            simd::storev(lanes[0], j.value);
            simd::storev(lanes[1], j.d1);
            simd::storev(lanes[2], j.d2);
            simd::storev(lanes[3], j.d3);
            // float: the vector tanh is within 2e-6 of std::tanh (test_activations), and f'' and f''' amplify
            // an error in y up to ~8 times (|d/dy of -2 (1 - y^2)(1 - 3 y^2)| <= 8 for |y| <= 1).
            const double margin = std::is_same_v<T, float> ? 2e-5 : 1e-6;
            for (std::size_t l = 0; l < W; ++l) {
                const Jet<T> s = Act::jet(z[i + l]);
                REQUIRE(lanes[0][l] == Approx(s.value).epsilon(1e-5).margin(margin));
                REQUIRE(lanes[1][l] == Approx(s.d1).epsilon(1e-5).margin(margin));
                REQUIRE(lanes[2][l] == Approx(s.d2).epsilon(1e-5).margin(margin));
                REQUIRE(lanes[3][l] == Approx(s.d3).epsilon(1e-5).margin(margin));
            }
        }
    }
}

// u, grad u and the diagonal Hessian entries from the pass, against central differences of the forward pass.
template <class Net>
void derivatives_match_finite_differences() {
    constexpr std::size_t F = Net::in_size, O = Net::out_size;
    std::vector<double> p(Net::num_params);
    init_params<Net>(p, 5);
    for (auto& v : p) v *= 1.5;  // larger weights: more curvature
    const std::size_t n = 37;
    const auto x = test::random_vector(n * F, 8);
    std::vector<std::size_t> all(F);
    for (std::size_t i = 0; i < F; ++i) all[i] = i;
    DerivativeSpec spec = DerivativeSpec::diagonal(F, all);
    spec.second.push_back(all);  // and the Laplacian as one more column
    DerivativeWorkspace<Net, double> ws(spec, n, 1);
    const std::size_t C = spec.columns();
    std::vector<double> out(n * O * C);
    ws.derivatives(p.data(), x.data(), out.data(), n);
    const double h = 1e-4;
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t o = 0; o < O; ++o) {
            std::vector<double> xs(x.begin() + static_cast<std::ptrdiff_t>(s * F), x.begin() + static_cast<std::ptrdiff_t>((s + 1) * F));
            const double* got = &out[(s * O + o) * C];
            const double u = net_value<Net>(p, xs, o);
            REQUIRE(got[0] == Approx(u).epsilon(1e-13).margin(1e-13));
            double lap = 0;
            for (std::size_t i = 0; i < F; ++i) {
                auto up = xs, down = xs, up2 = xs, down2 = xs;
                up[i] += h;
                down[i] -= h;
                up2[i] += 2 * h;
                down2[i] -= 2 * h;
                const double fu = net_value<Net>(p, up, o), fd = net_value<Net>(p, down, o);
                // fourth-order central difference (the products of a Parallel have larger third derivatives)
                const double first = (8 * (fu - fd) - (net_value<Net>(p, up2, o) - net_value<Net>(p, down2, o))) / (12 * h);
                INFO("sample " << s << " output " << o << " coordinate " << i);
                REQUIRE(got[1 + i] == Approx(first).epsilon(1e-6).margin(1e-8));
                const double second = (fu - 2 * u + fd) / (h * h);
                REQUIRE(got[1 + F + i] == Approx(second).epsilon(1e-4).margin(1e-5));
                lap += got[1 + F + i];
            }
            REQUIRE(got[1 + 2 * F] == Approx(lap).epsilon(1e-12).margin(1e-12));
        }
}

template <class Net>
void parameter_gradient_matches_finite_differences() {
    std::vector<double> p(Net::num_params), g(Net::num_params, 0.0);
    init_params<Net>(p, 9);
    const std::size_t n = 45;
    const auto x = test::random_vector(n * Net::in_size, 10);
    DerivativeWorkspace<Net, double> ws(full_spec<Net>(), n, 1);
    const auto r = test_residual<Net>();
    ws.add_value_and_gradient(p.data(), g.data(), x.data(), n, r, 1.0, 1);
    auto loss = [&](const std::vector<double>& q) {
        std::vector<double> dummy(Net::num_params, 0.0);
        return ws.add_value_and_gradient(q.data(), dummy.data(), x.data(), n, r, 1.0, 1);
    };
    REQUIRE(test::gradient_error(loss, p, g) < 1e-6);
}

}  // namespace

TEMPLATE_TEST_CASE("activation jets: f', f'', f''' against finite differences (double)", "[derivatives][activation]",
                   Identity, ReLU, Tanh, Sigmoid, Softplus, GELU, ELU, LeakyReLU<>, LeakySlope02, SiLU, GELUExact, Sin<>, Sin30) {
    jet_matches_finite_differences<TestType>();
}

TEMPLATE_TEST_CASE("activation jets: vector form matches scalar form", "[derivatives][activation]", Identity, ReLU,
                   Tanh, Sigmoid, Softplus, GELU, ELU, LeakyReLU<>, LeakySlope02, SiLU, GELUExact, Sin<>, Sin30) {
    jet_vector_matches_scalar<TestType, float>();
    jet_vector_matches_scalar<TestType, double>();
}

TEST_CASE("input derivatives: u, grad u, Hessian diagonal and Laplacian against finite differences", "[derivatives]") {
    derivatives_match_finite_differences<Mlp2>();
    derivatives_match_finite_differences<Mlp3>();
    derivatives_match_finite_differences<Mlp1>();
    derivatives_match_finite_differences<MlpOther>();
}

TEST_CASE("input derivatives through containers: u, grad u, Hessian diagonal and Laplacian against finite differences",
          "[derivatives][containers]") {
    derivatives_match_finite_differences<ResNet>();
    derivatives_match_finite_differences<DeepONet>();
    derivatives_match_finite_differences<ProductNet>();
    derivatives_match_finite_differences<SumNet>();
    derivatives_match_finite_differences<ConcatNet>();
    derivatives_match_finite_differences<Product3Net>();
    derivatives_match_finite_differences<Dot4Net>();
}

TEST_CASE("input derivatives through containers: parameter gradient of a residual loss against finite differences",
          "[derivatives][containers]") {
    parameter_gradient_matches_finite_differences<ResNet>();
    parameter_gradient_matches_finite_differences<DeepONet>();
    parameter_gradient_matches_finite_differences<ProductNet>();
    parameter_gradient_matches_finite_differences<SumNet>();
    parameter_gradient_matches_finite_differences<ConcatNet>();
    parameter_gradient_matches_finite_differences<Product3Net>();
    parameter_gradient_matches_finite_differences<Dot4Net>();
}

TEST_CASE("input derivatives: parameter gradient of a residual loss against finite differences", "[derivatives]") {
    parameter_gradient_matches_finite_differences<Mlp2>();
    parameter_gradient_matches_finite_differences<Mlp3>();
    parameter_gradient_matches_finite_differences<Mlp1>();
    parameter_gradient_matches_finite_differences<MlpOther>();
}

}  // namespace test_input_derivatives
