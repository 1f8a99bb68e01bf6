// Chain: compile-time shapes and offsets, whole-chain gradients against finite differences (double),
// chunked and threaded evaluation against one chunk, bit-for-bit determinism across thread counts, and
// a one-sample chunk at the end of a batch. predict, batches that do not fill whole vectors and the size
// errors of the entry points are in test_chain_calls.cpp; a Conv and MaxPool pulled back as one in
// test_chain_conv_pool.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_chain {

using namespace chainlet;

using Tiny = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;
using Mixed = Chain<Input<3>, Dense<6, GELU>, DenseNoBias<5, Softplus>, Dense<4, Sigmoid>, Dense<3, ReLU>, Dense<2>>;

TEST_CASE("Chain: sizes and offsets are compile-time constants", "[chain]") {
    STATIC_REQUIRE(Tiny::num_params == 756);
    STATIC_REQUIRE(Tiny::param_offset[1] == 4 * 32 + 32);
    STATIC_REQUIRE(Tiny::param_offset[2] == 160 + 32 * 16 + 16);
    STATIC_REQUIRE(Tiny::in_size == 4);
    STATIC_REQUIRE(Tiny::out_size == 4);
    STATIC_REQUIRE(Tiny::max_width == 32);
    STATIC_REQUIRE(Mixed::num_params == (3 * 6 + 6) + 6 * 5 + (5 * 4 + 4) + (4 * 3 + 3) + (3 * 2 + 2));
}

template <class Net, class L, class Y>
void check_chain_gradient(std::size_t n, const Y& y, L loss) {
    std::vector<double> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, 5, InitKind::glorot_normal);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.1 * std::sin(static_cast<double>(i));  // non-zero biases
    const auto x = test::random_vector(n * Net::in_size, 6);
    value_and_gradient<Net>(p, g, x, y, loss);
    std::vector<double> scratch(Net::num_params);
    const double err = test::gradient_error(
        [&](const std::vector<double>& pp) { return value_and_gradient<Net>(pp, scratch, x, y, loss); }, p, g);
    REQUIRE(err < 1e-6);
}

TEST_CASE("Chain: gradient of the mean loss matches finite differences (double)", "[chain][gradient]") {
    for (std::size_t n : {1, 3, 40}) {
        INFO("n=" << n);
        check_chain_gradient<Tiny>(n, test::random_vector(n * 4, 7), SquaredError{});
        check_chain_gradient<Mixed>(n, test::random_vector(n * 2, 8), AbsoluteError{});
        std::vector<std::int32_t> labels(n);
        for (std::size_t i = 0; i < n; ++i) labels[i] = static_cast<std::int32_t>(i % 2);
        check_chain_gradient<Mixed>(n, labels, SoftmaxCrossEntropy{});
    }
}

TEST_CASE("Chain: many chunks on several threads give the one-chunk gradient", "[chain][parallel]") {
    using WS = Workspace<Tiny, double>;
    const std::size_t n = 3 * WS::chunk + 17;
    std::vector<double> p(Tiny::num_params), g1(Tiny::num_params), g2(Tiny::num_params);
    init_params<Tiny>(p, 1);
    const auto x = test::random_vector(n * 4, 2), y = test::random_vector(n * 4, 3);
    WS ws;
    const double l1 = value_and_gradient<Tiny>(ws, p, g1, x, y, SquaredError{}, 2);
    // Reference: one sample at a time, averaged.
    std::fill(g2.begin(), g2.end(), 0.0);
    double l2 = 0;
    std::vector<double> gs(Tiny::num_params);
    for (std::size_t s = 0; s < n; ++s) {
        l2 += value_and_gradient<Tiny>(std::span(p), gs, std::span(x).subspan(s * 4, 4), std::span(y).subspan(s * 4, 4),
                                       SquaredError{});
        for (std::size_t j = 0; j < gs.size(); ++j) g2[j] += gs[j];
    }
    for (auto& v : g2) v /= static_cast<double>(n);
    REQUIRE(l1 == Approx(l2 / static_cast<double>(n)).epsilon(1e-12));
    REQUIRE(test::max_rel_diff(g1, g2) < 1e-12);
}

TEST_CASE("Chain: same inputs give the same bits on 1, 2 and 3 threads", "[chain][parallel]") {
    const std::size_t n = 5000;
    std::vector<float> p(Tiny::num_params);
    init_params<Tiny>(p, 3);
    const auto x = test::random_vector<float>(n * 4, 4), y = test::random_vector<float>(n * 4, 5);
    std::vector<float> g1(p.size()), g2(p.size()), g3(p.size());
    Workspace<Tiny, float> ws;
    const float l1 = value_and_gradient<Tiny>(ws, p, g1, x, y, SquaredError{}, 1);
    const float l2 = value_and_gradient<Tiny>(ws, p, g2, x, y, SquaredError{}, 2);
    const float l3 = value_and_gradient<Tiny>(ws, p, g3, x, y, SquaredError{}, 3);
    REQUIRE(l1 == l2);
    REQUIRE(l1 == l3);
    REQUIRE(g1 == g2);
    REQUIRE(g1 == g3);
}

// A batch of one chunk takes the layers' pullback_assign (layer.hpp): g is written, not zeroed and added to.
TEMPLATE_TEST_CASE("Chain: value_and_gradient of one chunk writes g whatever it held, as the accumulating pullback",
                   "[chain]", float, double) {
    using T = TestType;
    std::vector<T> p(Tiny::num_params);
    init_params<Tiny>(p, 4);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += T(0.05) * static_cast<T>(std::sin(static_cast<double>(i)));
    for (const std::size_t n : {1, 3}) {
        INFO("n=" << n);
        const auto x = test::random_vector<T>(n * 4, 12), y = test::random_vector<T>(n * 4, 13);
        std::vector<T> g_nan(p.size(), std::numeric_limits<T>::quiet_NaN()), g_seven(p.size(), T(7));
        const T l = value_and_gradient<Tiny>(p, g_nan, x, y, SquaredError{});
        REQUIRE(value_and_gradient<Tiny>(p, g_seven, x, y, SquaredError{}) == l);
        REQUIRE(g_nan == g_seven);
        // The same gradient through the pullback API, which adds into a zeroed g: dL/dyhat = 2 (yhat - y) / n.
        std::vector<T> yhat(n * 4), dy(n * 4), dx(n * 4), g_added(p.size(), T(0));
        predict<Tiny>(p, x, yhat);
        for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = T(2) * (yhat[i] - y[i]) / static_cast<T>(n);
        PullbackWorkspace<Tiny, T> ws(n);
        vjp(ws, p, x, dy, dx, g_added);
        REQUIRE(test::max_rel_diff(g_nan, g_added) < (sizeof(T) == 4 ? 1e-5 : 1e-13));
    }
}

// A chunk of one sample reads its input row and its targets where they are (no gather), also when it is
// the last chunk of a larger batch and the rows come through an index (as in fit).
TEMPLATE_TEST_CASE("Chain: a one-sample chunk at the end of a batch reads the right rows, with and without an index",
                   "[chain]", float, double) {
    using T = TestType;
    using Img = Chain<Input<12, 12, 2>, Conv<3, 3, 4, Tanh>, Flatten, Dense<3>>;
    using WS = Workspace<Img, T>;
    const std::size_t n = WS::chunk + 1;  // chunks of `chunk` samples and one of a single sample
    REQUIRE(WS::chunk_size(n) == WS::chunk);
    std::vector<T> p(Img::num_params);
    init_params<Img>(p, 6);
    const std::size_t rows = 2 * n + 5;  // the data set; the batch takes every other row, backwards
    const auto data_x = test::random_vector<T>(rows * Img::in_size, 21), data_y = test::random_vector<T>(rows * 3, 22);
    std::vector<std::uint32_t> index(n);
    std::vector<T> x(n * Img::in_size), y(n * 3);
    for (std::size_t s = 0; s < n; ++s) {
        index[s] = static_cast<std::uint32_t>(rows - 1 - 2 * s);
        std::copy_n(data_x.begin() + index[s] * Img::in_size, Img::in_size, x.begin() + s * Img::in_size);
        std::copy_n(data_y.begin() + index[s] * 3, 3, y.begin() + s * 3);
    }
    std::vector<T> g_index(p.size()), g_rows(p.size());
    WS ws;
    const T l_index = ws.value_and_gradient(p.data(), g_index.data(), InputRows<T>{data_x.data()}, data_y.data(),
                                            index.data(), n, SquaredError{});
    const T l_rows = value_and_gradient<Img>(ws, p, g_rows, x, y, SquaredError{});
    REQUIRE(l_index == l_rows);
    REQUIRE(g_index == g_rows);
    // and the gradient is the mean of the one-sample gradients
    std::vector<T> g_mean(p.size(), T(0)), g_one(p.size());
    for (std::size_t s = 0; s < n; ++s) {
        value_and_gradient<Img>(ws, p, g_one, std::span<const T>(x).subspan(s * Img::in_size, Img::in_size),
                                std::span<const T>(y).subspan(s * 3, 3), SquaredError{});
        for (std::size_t j = 0; j < p.size(); ++j) g_mean[j] += g_one[j] / static_cast<T>(n);
    }
    REQUIRE(test::max_rel_diff(g_rows, g_mean) < (sizeof(T) == 4 ? 1e-4 : 1e-12));
    // predict: the last, one-sample chunk's outputs are its own (its input read in place)
    std::vector<T> out(n * 3), one(3);
    predict<Img>(ws, p, x, out);
    predict<Img>(ws, p, std::span<const T>(x).subspan((n - 1) * Img::in_size, Img::in_size), one);
    for (std::size_t o = 0; o < 3; ++o) REQUIRE(out[(n - 1) * 3 + o] == one[o]);
}

}  // namespace test_chain
