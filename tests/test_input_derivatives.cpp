// The input-derivative pass (derivatives/taylor.hpp) and the activations' jets it needs: every
// derivative against finite differences in double, the SIMD form against the scalar form on odd
// lengths, the parameter gradient of a residual loss against finite differences, float against double,
// the same bits on 1 and 2 threads, no allocation inside a training step; on MLPs and on chains with
// containers (Residual, Slice, Parallel of every combine, ActivationLayer). The parameter Hessian-vector
// product (derivatives/hvp.hpp) against finite differences of the gradient, on the same chains.
#include <catch2/catch.hpp>

#include <cmath>
#include <type_traits>
#include <vector>

#include "alloc_counter.hpp"
#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/hvp.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "support.hpp"

namespace test_input_derivatives {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

namespace {

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

// The network's first output at one sample, by the plain forward pass.
template <class Net, class T>
T net_value(const std::vector<T>& p, std::vector<T> x, std::size_t output = 0) {
    std::vector<T> saved(Net::saved_per_sample + 1), y(Net::out_size);
    Net::forward(p.data(), x.data(), y.data(), saved.data(), 1);
    return y[output];
}

using Mlp2 = Chain<Input<2>, Dense<8, Tanh>, Dense<6, GELU>, Dense<1>>;
using Mlp3 = Chain<Input<3>, Dense<5, Softplus>, Dense<7, Sigmoid>, DenseNoBias<4, Tanh>, Dense<2, Identity>>;
using Mlp1 = Chain<Input<1>, Dense<9, GELU>, Dense<1, Tanh>>;
// Containers: a residual block; a DeepONet (Dot of a branch net on x_0 and a trunk net on x_1, x_2, the
// trunk with a residual block inside); a Product and a Sum of branches with Slice and ActivationLayer;
// a Concat after a residual block on the input (its input cotangent is not wanted).
using ResNet = Chain<Input<3>, Dense<8, Tanh>, Residual<Dense<8, Tanh>>, Dense<1>>;
using DeepONet = Chain<Input<3>, Parallel<Dot, Branch<Slice<0, 1>, Dense<6, Tanh>, Dense<5>>,
                                          Branch<Slice<1, 2>, Dense<6, GELU>, Residual<Dense<6, Tanh>>, Dense<5, Tanh>>>>;
using ProductNet = Chain<Input<2>, Parallel<Product, Branch<Dense<4, Tanh>>, Branch<Slice<1, 1>, Dense<4, Sigmoid>>>,
                         Dense<1>>;
using SumNet = Chain<Input<2>, Parallel<Sum, Branch<Dense<5, Tanh>, ActivationLayer<Softplus>>,
                                        Branch<Slice<0, 2>, Dense<5, GELU>>, Branch<Dense<5>>>,
                     Residual<Dense<5, Tanh>, Dense<5>>, Dense<2>>;
// Products of three and four factors (partial products saved, pulled back one factor at a time).
using Product3Net = Chain<Input<3>, Parallel<Product, Branch<Slice<0, 1>, Dense<4, Tanh>>, Branch<Slice<1, 1>, Dense<4, Sigmoid>>,
                                             Branch<Slice<2, 1>, Dense<4, GELU>>>,
                          Dense<1>>;
using Dot4Net = Chain<Input<2>, Parallel<Dot, Branch<Dense<5, Tanh>>, Branch<Slice<1, 1>, Dense<5, Tanh>>,
                                         Branch<Dense<5, Softplus>>, Branch<Slice<0, 1>, Dense<5>>>>;
using ConcatNet = Chain<Input<2>, Residual<Dense<2, Tanh>>,
                        Parallel<Concat, Branch<Dense<4, Tanh>>, Branch<Slice<1, 1>, Dense<3, Sigmoid>>, Branch<Slice<0, 2>>>,
                        ActivationLayer<Tanh>, Dense<1>>;

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

// A residual using every column: loss = mean (u + sum_i b_i u_i + sum_k c_k u_kk - source)^2 per output 0.
template <class Net>
auto test_residual() {
    std::vector<double> b(Net::in_size), c(Net::in_size + 1);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.3 + 0.2 * static_cast<double>(i);
    for (std::size_t k = 0; k < c.size(); ++k) c[k] = -0.5 + 0.4 * static_cast<double>(k);
    return linear_residual<double>(b, c, [](const double* x, std::size_t) { return std::sin(x[0]); }, 0.7);
}

template <class Net>
DerivativeSpec full_spec() {
    constexpr std::size_t F = Net::in_size;
    std::vector<std::size_t> all(F);
    for (std::size_t i = 0; i < F; ++i) all[i] = i;
    DerivativeSpec spec = DerivativeSpec::diagonal(F, all);
    spec.second.push_back(all);
    return spec;
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
                   Identity, ReLU, Tanh, Sigmoid, Softplus, GELU) {
    jet_matches_finite_differences<TestType>();
}

TEMPLATE_TEST_CASE("activation jets: vector form matches scalar form", "[derivatives][activation]", Identity, ReLU,
                   Tanh, Sigmoid, Softplus, GELU) {
    jet_vector_matches_scalar<TestType, float>();
    jet_vector_matches_scalar<TestType, double>();
}

TEST_CASE("input derivatives: u, grad u, Hessian diagonal and Laplacian against finite differences", "[derivatives]") {
    derivatives_match_finite_differences<Mlp2>();
    derivatives_match_finite_differences<Mlp3>();
    derivatives_match_finite_differences<Mlp1>();
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
}

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

TEST_CASE("hvp: the same bits on 1 and 2 threads", "[derivatives][hvp][repro]") {
    hvp_same_bits_on_1_and_2_threads<Mlp3>();
    hvp_same_bits_on_1_and_2_threads<DeepONet>();
    hvp_same_bits_on_1_and_2_threads<Dot4Net>();
}

}  // namespace test_input_derivatives
