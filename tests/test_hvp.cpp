// The parameter Hessian-vector product (derivatives/hvp.hpp) against finite differences of the
// gradient, on MLPs and chains with containers, and the same bits on 1 and 2 threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <span>
#include <type_traits>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/hvp.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "derivative_nets.hpp"
#include "support.hpp"

namespace test_hvp {

using namespace chainlet;
using namespace test::derivative_nets;

namespace {

// H v against central differences of the gradient (train.hpp's value_and_gradient) along v.
template <class Net>
void hvp_matches_finite_differences(std::size_t n, int threads) {
    constexpr std::size_t P = Net::num_params;
    std::vector<double> p(P), v = test::random_vector(P, 31), g(P), hv(P), gref(P);
    init_params<Net>(p, 12);
    const auto x = test::random_vector(n * Net::in_size, 13), t = test::random_vector(n * Net::out_size, 14);
    HessianVectorWorkspace<Net, double> ws(n, threads);
    const double l = ws.hvp(p.data(), v.data(), g.data(), hv.data(), x.data(), t.data(), n, SquaredError{}, threads);
    const double lref = value_and_gradient<Net>(p, gref, x, t, SquaredError{});
    REQUIRE(l == Approx(lref).epsilon(1e-12));
    REQUIRE(test::max_rel_diff(g, gref) < 1e-12);
    const double h = 1e-5;
    std::vector<double> up = p, down = p, gu(P), gd(P);
    for (std::size_t i = 0; i < P; ++i) up[i] += h * v[i], down[i] -= h * v[i];
    value_and_gradient<Net>(up, gu, x, t, SquaredError{});
    value_and_gradient<Net>(down, gd, x, t, SquaredError{});
    double largest = 0, worst = 0;
    for (std::size_t i = 0; i < P; ++i) largest = std::max(largest, std::abs(gu[i] - gd[i]) / (2 * h));
    for (std::size_t i = 0; i < P; ++i) worst = test::worse(worst, std::abs(hv[i] - (gu[i] - gd[i]) / (2 * h)) / largest);
    INFO("worst error relative to the largest component: " << worst);
    REQUIRE(worst < 1e-7);
}

}  // namespace

TEST_CASE("hvp: parameter Hessian-vector product against finite differences of the gradient", "[derivatives][hvp]") {
    hvp_matches_finite_differences<Mlp2>(50, 1);
    hvp_matches_finite_differences<Mlp3>(300, 2);  // several chunks on 2 threads
    hvp_matches_finite_differences<Mlp1>(7, 1);
    hvp_matches_finite_differences<MlpOther>(40, 1);
}

TEST_CASE("hvp through containers: against finite differences of the gradient", "[derivatives][hvp][containers]") {
    hvp_matches_finite_differences<ResNet>(50, 1);
    hvp_matches_finite_differences<DeepONet>(300, 2);
    hvp_matches_finite_differences<ProductNet>(40, 1);
    hvp_matches_finite_differences<SumNet>(40, 1);
    hvp_matches_finite_differences<ConcatNet>(40, 1);
    hvp_matches_finite_differences<Product3Net>(40, 1);
    hvp_matches_finite_differences<Dot4Net>(40, 1);
}

namespace {

template <class Net>
void hvp_same_bits_on_1_and_2_threads() {
    constexpr std::size_t P = Net::num_params;
    const std::size_t n = 3000;
    std::vector<float> p(P), v = test::random_vector<float>(P, 1), h1(P), h2(P);
    init_params<Net>(p, 2);
    const auto x = test::random_vector<float>(n * Net::in_size, 3), t = test::random_vector<float>(n * Net::out_size, 4);
    HessianVectorWorkspace<Net, float> ws(n, 2);
    ws.hvp(p.data(), v.data(), nullptr, h1.data(), x.data(), t.data(), n, SquaredError{}, 1);
    ws.hvp(p.data(), v.data(), nullptr, h2.data(), x.data(), t.data(), n, SquaredError{}, 2);
    REQUIRE(h1 == h2);
}

}  // namespace

TEST_CASE("hvp: the span call checks every size and gives the pointer call's bits", "[derivatives][hvp][errors]") {
    using Net = Mlp3;
    constexpr std::size_t P = Net::num_params;
    const std::size_t n = 23;
    std::vector<double> p(P), g(P), hv(P), g_ref(P), hv_ref(P);
    init_params<Net>(p, 4);
    const auto v = test::random_vector(P, 5), x = test::random_vector(n * Net::in_size, 6),
               t = test::random_vector(n * Net::out_size, 7);
    HessianVectorWorkspace<Net, double> ws(n);
    const double l = ws.hvp(p, v, g, hv, x, t);
    REQUIRE(l == ws.hvp(p.data(), v.data(), g_ref.data(), hv_ref.data(), x.data(), t.data(), n));
    REQUIRE((g == g_ref && hv == hv_ref));
    std::vector<double> hv_only(P);
    REQUIRE(ws.hvp(p, v, {}, hv_only, x, t) == l);  // an empty gradient span: not wanted
    REQUIRE(hv_only == hv_ref);
    const std::span<const double> ps(p), vs(v), xs(x), ts(t);
    REQUIRE_THROWS_WITH(ws.hvp(ps.first(P - 1), vs, g, hv, xs, ts),
                        Catch::Matchers::StartsWith("HessianVectorWorkspace::hvp: the parameter buffer has"));
    REQUIRE_THROWS_WITH(ws.hvp(ps, vs.first(1), g, hv, xs, ts), Catch::Matchers::Contains("the direction v"));
    REQUIRE_THROWS_WITH(ws.hvp(ps, vs, std::span(g).first(1), hv, xs, ts), Catch::Matchers::Contains("the gradient buffer"));
    REQUIRE_THROWS_WITH(ws.hvp(ps, vs, g, std::span(hv).first(1), xs, ts), Catch::Matchers::Contains("the product buffer hv"));
    REQUIRE_THROWS_WITH(ws.hvp(ps, vs, g, hv, xs.first(4), ts), Catch::Matchers::Contains("the input has 4 values"));
    REQUIRE_THROWS_WITH(ws.hvp(ps, vs, g, hv, xs, ts.first(n * Net::out_size - 1)),
                        Catch::Matchers::Contains("the target buffer"));
    REQUIRE_THROWS_WITH(ws.hvp(ps, vs, g, hv, xs, ts, SquaredError{}, -1), Catch::Matchers::Contains("threads is -1"));
}

TEST_CASE("hvp: the same bits on 1 and 2 threads", "[derivatives][hvp][repro]") {
    hvp_same_bits_on_1_and_2_threads<Mlp3>();
    hvp_same_bits_on_1_and_2_threads<DeepONet>();
    hvp_same_bits_on_1_and_2_threads<Dot4Net>();
}

}  // namespace test_hvp
