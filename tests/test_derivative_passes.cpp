// The derivative passes beyond their finite-difference checks: jvp along a direction, float against
// double, the same bits on 1 and 2 threads over several groups of chunks, and no allocation inside a
// training step.
#include <catch2/catch.hpp>

#include <cmath>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "alloc_counter.hpp"
#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "derivative_nets.hpp"
#include "support.hpp"

namespace test_derivative_passes {

using namespace chainlet;
using namespace test::derivative_nets;

namespace {

template <class Net>
void jvp_matches_finite_differences() {
    constexpr std::size_t F = Net::in_size, O = Net::out_size;
    std::vector<double> p(Net::num_params);
    init_params<Net>(p, 3);
    const std::size_t n = 21, D = 2;
    const auto x = test::random_vector(n * F, 4), v = test::random_vector(n * D * F, 5);
    DerivativeWorkspace<Net, double> ws(DerivativeSpec{D, {{0}, {1}}}, n, 1);
    std::vector<double> y(n * O), ydot(n * D * O), d2(n * 2 * O);
    ws.jvp(p.data(), x.data(), v.data(), y.data(), ydot.data(), n, 1, d2.data());
    const double h = 1e-4;
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t i = 0; i < D; ++i)
            for (std::size_t o = 0; o < O; ++o) {
                std::vector<double> xs(F), up(F), down(F), up2(F), down2(F);
                for (std::size_t f = 0; f < F; ++f) {
                    xs[f] = x[s * F + f];
                    up[f] = xs[f] + h * v[(s * D + i) * F + f];
                    down[f] = xs[f] - h * v[(s * D + i) * F + f];
                    up2[f] = xs[f] + 2 * h * v[(s * D + i) * F + f];
                    down2[f] = xs[f] - 2 * h * v[(s * D + i) * F + f];
                }
                const double u = net_value<Net>(p, xs, o), fu = net_value<Net>(p, up, o), fd = net_value<Net>(p, down, o);
                const double first = (8 * (fu - fd) - (net_value<Net>(p, up2, o) - net_value<Net>(p, down2, o))) / (12 * h);
                REQUIRE(y[s * O + o] == Approx(u).epsilon(1e-13).margin(1e-13));
                REQUIRE(ydot[(s * D + i) * O + o] == Approx(first).epsilon(1e-6).margin(1e-8));
                REQUIRE(d2[(s * 2 + i) * O + o] == Approx((fu - 2 * u + fd) / (h * h)).epsilon(1e-4).margin(1e-5));
            }
}

}  // namespace

TEST_CASE("jvp: output tangents against finite differences along the direction", "[derivatives]") {
    jvp_matches_finite_differences<Mlp3>();
    jvp_matches_finite_differences<DeepONet>();
    jvp_matches_finite_differences<SumNet>();
    jvp_matches_finite_differences<Product3Net>();
}

TEST_CASE("input derivatives: the span calls check every size and give the pointer calls' bits", "[derivatives][errors]") {
    using Net = Mlp2;
    constexpr std::size_t P = Net::num_params, F = Net::in_size, O = Net::out_size;
    const DerivativeSpec spec = full_spec<Net>();
    const std::size_t n = 19, D = spec.tangents, K = spec.second.size(), C = spec.columns();
    std::vector<double> p(P);
    init_params<Net>(p, 8);
    const auto x = test::random_vector(n * F, 9), v = test::random_vector(n * D * F, 10);
    DerivativeWorkspace<Net, double> ws(spec, n, 1);
    std::vector<double> out(n * O * C), out_ref(out.size());
    ws.derivatives(p, x, out);
    ws.derivatives(p.data(), x.data(), out_ref.data(), n);
    REQUIRE(out == out_ref);
    std::vector<double> y(n * O), yd(n * D * O), d2(n * K * O), y_ref(y.size()), yd_ref(yd.size()), d2_ref(d2.size());
    ws.jvp(p, x, v, y, yd, 1, d2);
    ws.jvp(p.data(), x.data(), v.data(), y_ref.data(), yd_ref.data(), n, 1, d2_ref.data());
    REQUIRE((y == y_ref && yd == yd_ref && d2 == d2_ref));
    const auto residual = test_residual<Net>();
    std::vector<double> g(P, 0.5), g_ref(P, 0.5);  // both add into 0.5
    const double l = ws.add_value_and_gradient(p, g, x, residual);
    REQUIRE(l == ws.add_value_and_gradient(p.data(), g_ref.data(), x.data(), n, residual));
    REQUIRE(g == g_ref);

    const std::span<const double> ps(p), xs(x), vs(v);
    REQUIRE_THROWS_WITH(ws.derivatives(ps.first(P - 1), xs, out),
                        "DerivativeWorkspace::derivatives: the parameter buffer has " + std::to_string(P - 1) + " elements, expected " +
                            std::to_string(P));
    REQUIRE_THROWS_WITH(ws.derivatives(ps, xs.first(2 * n - 1), out),
                        Catch::Matchers::StartsWith("DerivativeWorkspace::derivatives: the input has 37 values"));
    REQUIRE_THROWS_WITH(ws.derivatives(ps, xs.first(0), out),
                        Catch::Matchers::StartsWith("DerivativeWorkspace::derivatives: the input has 0 values"));
    REQUIRE_THROWS_WITH(ws.derivatives(ps, xs, std::span(out).first(out.size() - 1)),
                        Catch::Matchers::Contains("the output buffer (n x out_size x columns) has " +
                                                  std::to_string(n * O * C - 1) + " elements, expected " +
                                                  std::to_string(n * O * C)));
    REQUIRE_THROWS_WITH(ws.derivatives(ps, xs, out, -2), Catch::Matchers::Contains("threads is -2"));
    REQUIRE_THROWS_WITH(ws.jvp(ps, xs, vs.first(v.size() - 1), y, yd), Catch::Matchers::Contains("the directions v"));
    REQUIRE_THROWS_WITH(ws.jvp(ps, xs, vs, std::span(y).first(n - 1), yd), Catch::Matchers::Contains("the output y"));
    REQUIRE_THROWS_WITH(ws.jvp(ps, xs, vs, y, std::span(yd).first(1)), Catch::Matchers::Contains("the tangent output ydot"));
    REQUIRE_THROWS_WITH(ws.jvp(ps, xs, vs, y, yd, 1, std::span(d2).first(1)),
                        Catch::Matchers::Contains("the second-derivative output d2"));
    REQUIRE_THROWS_WITH(ws.add_value_and_gradient(ps, std::span(g).first(P - 1), xs, residual),
                        Catch::Matchers::StartsWith("DerivativeWorkspace::add_value_and_gradient: the gradient buffer has"));
    REQUIRE(g == g_ref);  // nothing written by a call that threw
}

namespace {

template <class Net>
void float_agrees_with_double() {
    static_assert(Net::in_size == 2, "the float residual below has the coefficients of test_residual for 2 inputs");
    std::vector<double> p(Net::num_params), g(Net::num_params, 0.0);
    init_params<Net>(p, 2);
    std::vector<float> pf(p.begin(), p.end()), gf(Net::num_params, 0.0f);
    const std::size_t n = 300;
    const auto x = test::random_vector(n * 2, 6);
    std::vector<float> xf(x.begin(), x.end());
    auto spec = full_spec<Net>();
    DerivativeWorkspace<Net, double> wd(spec, n, 1);
    DerivativeWorkspace<Net, float> wf(spec, n, 1);
    const double ld = wd.add_value_and_gradient(p.data(), g.data(), x.data(), n, test_residual<Net>(), 1.0, 1);
    const auto rf = linear_residual<float>({0.3f, 0.5f}, {-0.5f, -0.1f, 0.3f},
                                           [](const float* q, std::size_t) { return std::sin(q[0]); }, 0.7f);
    const float lf = wf.add_value_and_gradient(pf.data(), gf.data(), xf.data(), n, rf, 1.0f, 1);
    REQUIRE(lf == Approx(ld).epsilon(1e-4));
    REQUIRE(test::max_rel_diff(gf, g) < 1e-4);
}

}  // namespace

TEST_CASE("input derivatives: float agrees with double", "[derivatives]") {
    float_agrees_with_double<Mlp2>();
    float_agrees_with_double<ProductNet>();
    float_agrees_with_double<SumNet>();
    float_agrees_with_double<ConcatNet>();
    float_agrees_with_double<Dot4Net>();
}

namespace {

template <class Net>
void same_bits_on_1_and_2_threads() {
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 1);
    const std::size_t n = 5000;
    const auto x = test::random_vector<float>(n * 2, 7);
    const auto r = linear_residual<float>({}, {1.0f}, [](const float* q, std::size_t) { return q[0] * q[1]; });
    DerivativeWorkspace<Net, float> ws(DerivativeSpec::laplacian(2), n, 2);
    REQUIRE(ws.num_groups(n) > 2);
    std::vector<float> g1(Net::num_params, 0.0f), g2(Net::num_params, 0.0f);
    const float l1 = ws.add_value_and_gradient(p.data(), g1.data(), x.data(), n, r, 1.0f, 1);
    const float l2 = ws.add_value_and_gradient(p.data(), g2.data(), x.data(), n, r, 1.0f, 2);
    REQUIRE(l1 == l2);
    REQUIRE(g1 == g2);
}

}  // namespace

TEST_CASE("input derivatives: the same bits on 1 and 2 threads, several groups of chunks", "[derivatives][repro]") {
    same_bits_on_1_and_2_threads<Chain<Input<2>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<1>>>();
    same_bits_on_1_and_2_threads<Chain<Input<2>, Dense<16, Tanh>, Residual<Dense<16, Tanh>>,
                                       Parallel<Product, Branch<Dense<8, Tanh>>, Branch<Slice<0, 8>, Dense<8, GELU>>>,
                                       Dense<1>>>();
    same_bits_on_1_and_2_threads<Chain<Input<2>, Parallel<Dot, Branch<Slice<0, 1>, Dense<8, Tanh>, Dense<6>>,
                                                          Branch<Slice<1, 1>, Dense<8, Tanh>, Dense<6, Tanh>>>>>();
    same_bits_on_1_and_2_threads<Chain<Input<2>, Parallel<Product, Branch<Dense<8, Tanh>>, Branch<Dense<8, GELU>>,
                                                          Branch<Slice<1, 1>, Dense<8, Sigmoid>>>,
                                       Dense<1>>>();
}

namespace {

template <class Net>
void training_step_allocates_nothing() {
    std::vector<double> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, 1);
    const std::size_t n = 1024, nb = 256;
    const auto x = test::random_vector(n * 2, 7), xb = test::random_vector(nb * 2, 8);
    const auto interior = linear_residual<double>({}, {1.0}, [](const double* q, std::size_t) { return q[0]; });
    const auto boundary = linear_residual<double>({}, {}, [](const double*, std::size_t) { return 0.0; }, 1.0);
    DerivativeWorkspace<Net, double> wi(DerivativeSpec::laplacian(2), n, 2), wb(DerivativeSpec::value(), nb, 2);
    Adam opt(1e-3);
    opt.init(p.size());
    auto step = [&] {
        std::fill(g.begin(), g.end(), 0.0);
        wi.add_value_and_gradient(p.data(), g.data(), x.data(), n, interior, 1.0, 2);
        wb.add_value_and_gradient(p.data(), g.data(), xb.data(), nb, boundary, 1.0, 2);
        opt.step(p, g);
    };
    step();
    const long before = test::allocations.load();
    for (int i = 0; i < 10; ++i) step();
    const long during = test::allocations.load() - before;
    REQUIRE(during == 0);
}

}  // namespace

TEST_CASE("input derivatives: a training step (pass, pullback, Adam) allocates nothing", "[derivatives][alloc]") {
    training_step_allocates_nothing<Chain<Input<2>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<1>>>();
    training_step_allocates_nothing<Chain<Input<2>, Residual<Dense<2, Tanh>>,
                                          Parallel<Dot, Branch<Slice<0, 1>, Dense<8, Tanh>>, Branch<Dense<8, Tanh>>>>>();
}

}  // namespace test_derivative_passes
