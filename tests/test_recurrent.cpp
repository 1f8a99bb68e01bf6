// GRU and LSTM: the layer checker (finite differences in double, float vs double, the contract's rules)
// on awkward sizes in both output modes, the forward pass against a plain per-sample reference written
// from PyTorch's equations, the parameter layout and its PyTorch names, PyTorch's initialisation range,
// a small chain trained end to end, the same bits on 1, 2 and 3 threads, and no allocation in a step.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "chainlet/chainlet.hpp"
#include "chainlet/io/architecture.hpp"
#include "support.hpp"

namespace test_recurrent {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

namespace {

template <class Layer, class InputSpec>
void check(std::size_t seed) {
    LayerCheckOptions o;
    o.chunk_sizes = {1, 3, 17};
    o.seed = seed;
    const auto r = check_layer<Layer, InputSpec>(o);
    INFO(r.report());
    REQUIRE(r.passed());
}

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// Per-sample reference from PyTorch's equations, with the weights read through the PyTorch layout
// (weight_ih[g][f] = p[f * G + g] etc., layers/recurrent.hpp). Returns every h_t, (T, H) row-major.
std::vector<double> reference(bool lstm, std::size_t T, std::size_t F, std::size_t H, const std::vector<double>& p,
                              const std::vector<double>& xs /* (T, F) */) {
    const std::size_t G = (lstm ? 4 : 3) * H;
    auto wih = [&](std::size_t g, std::size_t f) { return p[f * G + g]; };
    auto whh = [&](std::size_t g, std::size_t j) { return p[F * G + j * G + g]; };
    auto bih = [&](std::size_t g) { return p[F * G + H * G + g]; };
    auto bhh = [&](std::size_t g) { return p[F * G + H * G + G + g]; };
    std::vector<double> h(H, 0.0), c(H, 0.0), out;
    for (std::size_t t = 0; t < T; ++t) {
        std::vector<double> gi(G), gh(G);
        for (std::size_t g = 0; g < G; ++g) {
            gi[g] = bih(g);
            for (std::size_t f = 0; f < F; ++f) gi[g] += wih(g, f) * xs[t * F + f];
            gh[g] = bhh(g);
            for (std::size_t j = 0; j < H; ++j) gh[g] += whh(g, j) * h[j];
        }
        std::vector<double> hn(H);
        for (std::size_t j = 0; j < H; ++j) {
            if (lstm) {
                const double i = sigmoid(gi[j] + gh[j]), f = sigmoid(gi[H + j] + gh[H + j]);
                const double g = std::tanh(gi[2 * H + j] + gh[2 * H + j]), o = sigmoid(gi[3 * H + j] + gh[3 * H + j]);
                c[j] = f * c[j] + i * g;
                hn[j] = o * std::tanh(c[j]);
            } else {
                const double r = sigmoid(gi[j] + gh[j]), z = sigmoid(gi[H + j] + gh[H + j]);
                const double nn = std::tanh(gi[2 * H + j] + r * gh[2 * H + j]);
                hn[j] = (1 - z) * nn + z * h[j];
            }
        }
        h = hn;
        out.insert(out.end(), h.begin(), h.end());
    }
    return out;
}

template <class Layer, bool Lstm, bool Sequence, class T>
void check_against_reference() {
    constexpr std::size_t Steps = 5, F = 3, H = 7;
    using L = typename Layer::template bound<Shape<Steps, F>>;
    for (std::size_t n : {1, 3, 17}) {
        INFO("n=" << n);
        const auto pd = test::random_vector<double>(L::num_params, 11, 0.5);
        const auto xd = test::random_vector<double>(L::in_size * n, 12);
        std::vector<T> p(pd.begin(), pd.end()), x(xd.begin(), xd.end());
        std::vector<T> y(L::out_size * n), saved(L::saved_per_sample * n);
        L::forward(p.data(), x.data(), y.data(), saved.data(), n);
        for (std::size_t s = 0; s < n; ++s) {
            std::vector<double> xs(Steps * F);
            for (std::size_t k = 0; k < Steps * F; ++k) xs[k] = static_cast<double>(x[k * n + s]);
            std::vector<double> pr(p.begin(), p.end());
            const auto hs = reference(Lstm, Steps, F, H, pr, xs);
            for (std::size_t k = 0; k < L::out_size; ++k) {
                const double want = Sequence ? hs[k] : hs[(Steps - 1) * H + k];
                REQUIRE(static_cast<double>(y[k * n + s]) == Approx(want).margin(sizeof(T) == 4 ? 2e-6 : 1e-13));
            }
        }
    }
}

}  // namespace

TEMPLATE_TEST_CASE("GRU and LSTM pass the layer checker (T=5, F=3, H=7)", "[recurrent][gradient]", (GRU<7>),
                   (GRU<7, true>), (LSTM<7>), (LSTM<7, true>)) {
    check<TestType, Input<5, 3>>(1);
}

TEMPLATE_TEST_CASE("GRU and LSTM pass the layer checker on other sizes", "[recurrent][gradient]", (GRU<1>),
                   (GRU<9, true>), (LSTM<2>), (LSTM<11, true>)) {
    check<TestType, Input<1, 1>>(2);
    check<TestType, Input<4, 6>>(3);
    check<TestType, Input<9, 1>>(4);
}

TEST_CASE("Stacked recurrent layers pass the layer checker", "[recurrent][gradient]") {
    using Net = Chain<Input<4, 3>, GRU<6, true>, LSTM<5, true>, GRU<3>>;
    LayerCheckOptions o;
    const auto r = check_bound_layer<Net>(o);
    INFO(r.report());
    REQUIRE(r.passed());
}

TEST_CASE("GRU and LSTM forward match a per-sample reference of PyTorch's equations", "[recurrent]") {
    check_against_reference<GRU<7>, false, false, double>();
    check_against_reference<GRU<7, true>, false, true, double>();
    check_against_reference<LSTM<7>, true, false, double>();
    check_against_reference<LSTM<7, true>, true, true, double>();
    check_against_reference<GRU<7>, false, false, float>();
    check_against_reference<GRU<7, true>, false, true, float>();
    check_against_reference<LSTM<7>, true, false, float>();
    check_against_reference<LSTM<7, true>, true, true, float>();
}

TEST_CASE("GRU and LSTM sizes, PyTorch names and initialisation", "[recurrent]") {
    using Gl = GRU<7>::bound<Shape<5, 3>>;
    using Gs = GRU<7, true>::bound<Shape<5, 3>>;
    using Ll = LSTM<4>::bound<Shape<6, 2>>;
    STATIC_REQUIRE(Gl::num_params == 3 * 7 * (3 + 7) + 2 * 3 * 7);  // as nn.GRU(3, 7)
    STATIC_REQUIRE(Ll::num_params == 4 * 4 * (2 + 4) + 2 * 4 * 4);  // as nn.LSTM(2, 4)
    STATIC_REQUIRE(Gl::out_size == 7);
    STATIC_REQUIRE(std::is_same_v<Gs::out_shape, Shape<5, 7>>);
    REQUIRE(Gl::describe() == "GRU[7]");
    REQUIRE(Gs::describe() == "GRU[7,sequence]");
    REQUIRE(Ll::describe() == "LSTM[4]");

    using Net = Chain<Input<6, 2>, LSTM<4>, Dense<1>>;
    const auto tensors = architecture<Net>::torch_tensors();
    REQUIRE(tensors.size() == 6);
    REQUIRE(tensors[0].name == "0.weight_ih_l0");
    REQUIRE(tensors[0].shape == std::vector<std::uint64_t>{16, 2});
    REQUIRE(tensors[1].name == "0.weight_hh_l0");
    REQUIRE(tensors[1].shape == std::vector<std::uint64_t>{16, 4});
    REQUIRE(tensors[2].name == "0.bias_ih_l0");
    REQUIRE(tensors[3].name == "0.bias_hh_l0");
    REQUIRE(tensors[4].name == "1.weight");
    // weight_ih_l0[g][f] is W_ih[f * G + g]
    REQUIRE(tensors[0].source[5 * 2 + 1] == 1 * 16 + 5);
    REQUIRE(tensors[1].source[3 * 4 + 2] == 2 * 16 * 1 + 2 * 16 + 3);

    // PyTorch's init: U(-1/sqrt(H), 1/sqrt(H)) for weights and biases alike, not all equal.
    std::vector<double> p(Gl::num_params);
    Rng rng(5);
    Gl::init(std::span<double>(p), rng, InitKind::glorot_uniform);
    const double bound = 1 / std::sqrt(7.0);
    double lo = 1, hi = -1;
    for (double v : p) lo = std::min(lo, v), hi = std::max(hi, v);
    REQUIRE(lo >= -bound);
    REQUIRE(hi <= bound);
    REQUIRE(hi - lo > bound);  // spread over the range, biases included (they are not zero)
}

TEST_CASE("A GRU chain learns to sum a sequence", "[recurrent][fit]") {
    using Net = Chain<Input<6, 1>, GRU<8>, Dense<1>>;
    constexpr std::size_t N = 256;
    Rng rng(3);
    std::vector<float> x(N * 6), t(N);
    for (std::size_t s = 0; s < N; ++s) {
        float sum = 0;
        for (std::size_t k = 0; k < 6; ++k) sum += x[s * 6 + k] = static_cast<float>(rng.uniform() - 0.5);
        t[s] = sum;
    }
    std::vector<float> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, 7);
    const double before = value_and_gradient<Net>(p, g, x, t, SquaredError{});
    Adam opt(1e-2f);
    FitOptions o;
    o.epochs = 60;
    o.batch = 32;
    o.threads = 1;
    fit<Net>(p, SquaredError{}, x, t, opt, o);
    const double after = value_and_gradient<Net>(p, g, x, t, SquaredError{});
    INFO("loss " << before << " -> " << after);
    REQUIRE(after < 0.05 * before);
}

namespace {

template <class Net>
std::vector<float> train_threads(const std::vector<float>& x, const std::vector<float>& y, int threads) {
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 5);
    Adam opt(1e-3f);
    FitOptions o;
    o.epochs = 2;
    o.batch = 3 * Workspace<Net, float>::chunk + 5;  // several chunks and a partial one
    o.seed = 9;
    o.threads = threads;
    fit<Net>(p, SquaredError{}, x, y, opt, o);
    return p;
}

}  // namespace

TEMPLATE_TEST_CASE("repro: recurrent chains train to the same bits on 1, 2 and 3 threads", "[recurrent][repro]",
                   (Chain<Input<7, 3>, GRU<6>, Dense<2>>), (Chain<Input<7, 3>, LSTM<5, true>, Flatten, Dense<2>>)) {
    using Net = TestType;
    const std::size_t n = 3 * (3 * Workspace<Net, float>::chunk + 5);
    const auto x = test::random_vector<float>(Net::in_size * n, 1), y = test::random_vector<float>(Net::out_size * n, 2);
    const auto p1 = train_threads<Net>(x, y, 1);
    const auto p2 = train_threads<Net>(x, y, 2);
    const auto p3 = train_threads<Net>(x, y, 3);
    std::vector<float> p0(Net::num_params);
    init_params<Net>(p0, 5);
    REQUIRE(p1 != p0);
    REQUIRE(p1 == p2);
    REQUIRE(p1 == p3);
}

TEMPLATE_TEST_CASE("a recurrent training step and predict allocate nothing", "[recurrent][alloc]",
                   (Chain<Input<7, 3>, GRU<6, true>, LSTM<5>, Dense<2>>)) {
    using Net = TestType;
    for (std::size_t n : {std::size_t(1), std::size_t(300)}) {
        std::vector<float> p(Net::num_params), g(Net::num_params);
        init_params<Net>(p, 1);
        const auto x = test::random_vector<float>(Net::in_size * n, 2), y = test::random_vector<float>(Net::out_size * n, 3);
        Workspace<Net, float> ws(n, 2);
        Adam opt(1e-3f);
        opt.init(p.size());
        value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, 2);  // warm-up (OpenMP starts its threads)
        const long before = test::allocations.load();
        for (int step = 0; step < 5; ++step) {
            value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, 2);
            opt.step(p, g);
        }
        const long during_steps = test::allocations.load() - before;
        std::vector<float> out(Net::out_size * n);
        predict<Net>(ws, p, x, out, 2);
        const long before_predict = test::allocations.load();
        predict<Net>(ws, p, x, out, 2);
        const long during_predict = test::allocations.load() - before_predict;
        INFO("n=" << n);
        REQUIRE(during_steps == 0);
        REQUIRE(during_predict == 0);
    }
}

}  // namespace test_recurrent
