// Chain: compile-time shapes and offsets, whole-chain gradients against finite differences (double),
// chunked and threaded evaluation against one chunk, bit-for-bit determinism across thread counts,
// and the size errors of the public entry points.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_chain {  // several test files make one program (tests/CMakeLists.txt)

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

TEST_CASE("Chain: predict writes the caller's buffer and agrees with the forward pass of one sample", "[chain]") {
    const std::size_t n = 1100;
    std::vector<float> p(Tiny::num_params);
    init_params<Tiny>(p, 9);
    const auto x = test::random_vector<float>(n * 4, 10);
    std::vector<float> out(n * 4), one(4), out_again(n * 4);
    predict<Tiny>(p, x, out, 2);
    for (std::size_t s = 0; s < n; s += 97) {
        predict<Tiny>(std::span<const float>(p), std::span<const float>(x).subspan(s * 4, 4), one);
        for (std::size_t o = 0; o < 4; ++o) REQUIRE(one[o] == Approx(out[s * 4 + o]).epsilon(1e-5).margin(1e-6));
    }
    const auto kept = out;
    predict<Tiny>(p, test::random_vector<float>(n * 4, 11), out_again);
    REQUIRE(out == kept);  // an earlier result is never overwritten by a later call
}

// predict runs a chunk of 2 or more samples that does not fill whole vectors padded with copies of its
// last sample (workspace.hpp): every sample's outputs must be the bits it gets in a chunk of 16 (whole
// vectors at every width), from float or byte inputs, in a batch of one chunk (2-17 samples) and as the
// last chunk of a batch of many (chunk + 3) -- except a batch of at most Workspace::one_by_one samples,
// which runs sample by sample: each gets the bits it gets alone. (test_no_alloc: a workspace made for
// the batch holds the padding.)
TEMPLATE_TEST_CASE("Chain: predict of a batch that does not fill whole vectors", "[chain]", float, double) {
    using T = TestType;
    using Img = Chain<Input<6, 6, 2>, Conv<3, 3, 4, Tanh>, MaxPool<2>, Flatten, Dense<5, ReLU>, Dense<3>>;
    using WS = Workspace<Img, T>;
    constexpr std::size_t rows = (WS::chunk + 3 + 15) / 16 * 16;
    std::vector<T> p(Img::num_params);
    init_params<Img>(p, 4);
    std::vector<std::uint8_t> bytes(rows * Img::in_size);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 24);
    std::vector<T> x(bytes.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(bytes[i]) * T(0.01) - T(1);
    std::vector<T> ref(rows * 3);
    WS ref_ws(16, 1);
    for (std::size_t s0 = 0; s0 < rows; s0 += 16)
        ref_ws.predict(p.data(), InputRows<T>{x.data() + s0 * Img::in_size}, ref.data() + s0 * 3, 16);
    std::vector<T> alone(WS::one_by_one * 3);
    for (std::size_t s = 0; s < WS::one_by_one; ++s)
        ref_ws.predict(p.data(), InputRows<T>{x.data() + s * Img::in_size}, alone.data() + s * 3, 1);
    std::vector<std::size_t> sizes{WS::chunk + 3};
    for (std::size_t n = 2; n <= 17; ++n) sizes.push_back(n);
    for (const std::size_t n : sizes) {
        INFO("n=" << n << ", chunks of " << WS::chunk_size(n));
        REQUIRE((n <= WS::chunk || n % WS::chunk_size(n) > 1));  // no one-sample chunk (a path of its own)
        std::vector<T> out(n * 3, T(-7)), out_bytes(n * 3, T(-7));
        WS ws(n, 1);
        ws.predict(p.data(), InputRows<T>{x.data()}, out.data(), n);
        ws.predict(p.data(), InputRows<T, std::uint8_t>{bytes.data(), T(0.01), T(-1)}, out_bytes.data(), n);
        const std::vector<T>& expected = n <= WS::one_by_one ? alone : ref;
        for (std::size_t i = 0; i < n * 3; ++i) {
            REQUIRE(out[i] == expected[i]);
            REQUIRE(out_bytes[i] == expected[i]);
        }
    }
}

// value_and_gradient pads a chunk of 2 or more samples that does not fill whole vectors as predict does,
// the copies' output cotangent zero, and runs a batch of at most one_by_one samples one at a time
// (workspace.hpp). Either way the loss must be the mean of the samples' losses and the gradient the mean
// of their gradients (each sample alone as the reference): a copy of the last sample entering a sum
// would count that sample twice or more. A shuffled index must give the bits of its rows gathered
// beforehand, and 2 threads those of 1.
TEMPLATE_TEST_CASE("Chain: value_and_gradient of a batch that does not fill whole vectors", "[chain][gradient]", float,
                   double) {
    using T = TestType;
    using Img = Chain<Input<6, 6, 2>, Conv<3, 3, 4, Tanh>, MaxPool<2>, Flatten, Dense<5, ReLU>, Dense<3>>;
    using WS = Workspace<Img, T>;
    const std::size_t rows = 2 * WS::chunk + 40;
    std::vector<T> p(Img::num_params);
    init_params<Img>(p, 4);
    const auto x = test::random_vector<T>(rows * Img::in_size, 21), y = test::random_vector<T>(rows * 3, 22);
    // Per sample, alone: loss and gradient.
    std::vector<T> sample_loss(rows), sample_grad(rows * Img::num_params);
    WS one(1, 1);
    for (std::size_t s = 0; s < rows; ++s)
        sample_loss[s] = one.value_and_gradient(p.data(), sample_grad.data() + s * Img::num_params,
                                                InputRows<T>{x.data() + s * Img::in_size}, y.data() + s * 3, nullptr, 1,
                                                SquaredError{});
    // A shuffled order of the rows, and the rows gathered in that order.
    std::vector<std::uint32_t> order(rows);
    for (std::size_t i = 0; i < rows; ++i) order[i] = static_cast<std::uint32_t>((i * 37 + 11) % rows);
    std::vector<T> xs(rows * Img::in_size), ys(rows * 3);
    for (std::size_t i = 0; i < rows; ++i) {
        std::copy_n(x.data() + order[i] * Img::in_size, Img::in_size, xs.data() + i * Img::in_size);
        std::copy_n(y.data() + order[i] * 3, 3, ys.data() + i * 3);
    }
    const T tol = std::is_same_v<T, float> ? T(2e-5) : T(1e-12);
    std::vector<std::size_t> sizes{WS::chunk + 3, 2 * WS::chunk + 37};
    for (std::size_t n = 2; n <= 17; ++n) sizes.push_back(n);
    for (const std::size_t n : sizes) {
        INFO("n=" << n << ", chunks of " << WS::chunk_size(n));
        WS ws(n, 2);
        std::vector<T> g(Img::num_params), g_index(Img::num_params), g_threads(Img::num_params);
        const T l = ws.value_and_gradient(p.data(), g.data(), InputRows<T>{xs.data()}, ys.data(), nullptr, n,
                                          SquaredError{});
        const T l_index = ws.value_and_gradient(p.data(), g_index.data(), InputRows<T>{x.data()}, y.data(),
                                                order.data(), n, SquaredError{});
        const T l_threads = ws.value_and_gradient(p.data(), g_threads.data(), InputRows<T>{x.data()}, y.data(),
                                                  order.data(), n, SquaredError{}, 2);
        REQUIRE(l_index == l);
        REQUIRE(l_threads == l);
        REQUIRE(g_index == g);
        REQUIRE(g_threads == g);
        double mean_loss = 0;
        std::vector<double> mean_grad(Img::num_params, 0.0);
        for (std::size_t i = 0; i < n; ++i) {
            mean_loss += sample_loss[order[i]] / static_cast<double>(n);
            for (std::size_t k = 0; k < Img::num_params; ++k)
                mean_grad[k] += sample_grad[order[i] * Img::num_params + k] / static_cast<double>(n);
        }
        double worst = 0, scale = 0;
        for (std::size_t k = 0; k < Img::num_params; ++k) scale = std::max(scale, std::abs(mean_grad[k]));
        for (std::size_t k = 0; k < Img::num_params; ++k)
            worst = test::worse(worst, std::abs(static_cast<double>(g[k]) - mean_grad[k]) / scale);
        REQUIRE(static_cast<double>(l) == Approx(mean_loss).epsilon(tol));
        REQUIRE(worst < tol);
    }
}

// predict reads a chunk's inputs before it writes the chunk's outputs, also for one sample: a one-layer
// chain (nothing between reading x and writing out) predicts in place, as into another buffer.
TEST_CASE("Chain: predict of one sample into the buffer holding its input", "[chain]") {
    using One = Chain<Input<4>, Dense<4, Tanh>>;
    std::vector<float> p(One::num_params);
    init_params<One>(p, 2);
    const auto x = test::random_vector<float>(4, 15);
    std::vector<float> out(4), in_place = x;
    predict<One>(p, x, out);
    predict<One>(p, in_place, in_place);
    REQUIRE(in_place == out);
}

TEST_CASE("Chain: wrong sizes are reported with what was expected and what was given", "[chain][errors]") {
    std::vector<float> p(Tiny::num_params), g(Tiny::num_params), x(8), y(8), out(8);
    init_params<Tiny>(p, 1);
    std::vector<float> short_p(10);
    REQUIRE_THROWS_WITH(value_and_gradient<Tiny>(short_p, g, x, y, SquaredError{}),
                        Catch::Contains("parameter buffer has 10 elements, expected 756"));
    std::vector<float> bad_x(7);
    REQUIRE_THROWS_WITH(value_and_gradient<Tiny>(p, g, bad_x, y, SquaredError{}),
                        Catch::Contains("expected a positive multiple of 4"));
    std::vector<float> bad_y(12);
    REQUIRE_THROWS_WITH(value_and_gradient<Tiny>(p, g, x, bad_y, SquaredError{}),
                        Catch::Contains("target buffer has 12 elements, expected 8"));
    std::vector<float> bad_out(4);
    REQUIRE_THROWS_WITH(predict<Tiny>(p, x, bad_out), Catch::Contains("output buffer has 4 elements, expected 8"));
    REQUIRE_THROWS_WITH(init_params<Tiny>(short_p, 1), Catch::Contains("expected 756"));
    std::vector<float> empty;
    REQUIRE_THROWS(predict<Tiny>(p, empty, out));
}

// A Conv followed by a MaxPool pulls back as one (Sequence::pulls_back_next: the Conv's pullback_from_rows
// with the MaxPool's cotangent_rows as its source, layer.hpp): the bits of the two layers' own pullbacks
// one after the other, adding into g and writing it, with and without dx, on chunks whose first
// convolution runs in bands (the pooling's cotangent then never written whole) and on others. The first
// convolution's 23 output rows leave one out of the 2 x 2 windows; the second pair has a dx to compute and
// 3 x 2 windows.
TEMPLATE_TEST_CASE("Chain: a Conv and the MaxPool after it pull back as one, with the bits of the two pullbacks",
                   "[chain][gradient]", float, double) {
    using T = TestType;
    using Net = Chain<Input<27, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2>, Conv<3, 3, 4, Softplus>, MaxPool<3, 2>, Flatten,
                      Dense<3>>;
    static_assert(Net::pulls_back_next<0, T>() && !Net::pulls_back_next<1, T>() && Net::pulls_back_next<2, T>() &&
                  !Net::pulls_back_next<3, T>() && !Net::pulls_back_next<4, T>());
    constexpr std::size_t W = simd::width<T>;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> p(Net::num_params);
    init_params<Net>(p, 5);
    for (const std::size_t n : {W, 2 * W, W + 3, std::size_t{1}}) {
        const auto x = test::random_vector<T>(Net::in_size * n, 40 + n), w = test::random_vector<T>(Net::out_size * n, 41 + n);
        const auto g0 = test::random_vector<T>(Net::num_params, 42);
        std::vector<T> y(Net::out_size * n), saved(Net::saved_per_sample * n);
        Net::forward(p.data(), x.data(), y.data(), saved.data(), n);
        for (const bool accumulate : {true, false})
            for (const bool with_dx : {false, true}) {
                INFO("n=" << n << " accumulate=" << accumulate << " dx=" << with_dx);
                auto run = [&](bool as_one) {
                    std::vector<T> g = accumulate ? g0 : std::vector<T>(g0.size(), nan), dy = w,
                                   dx(Net::in_size * n, nan), scratch(Net::scratch_per_sample * n, nan);
                    T* const dxp = with_dx ? dx.data() : nullptr;
                    if (as_one && accumulate) {
                        Net::pullback(p.data(), g.data(), x.data(), y.data(), saved.data(), scratch.data(), dy.data(), dxp, n);
                    } else if (as_one) {
                        Net::pullback_assign(p.data(), g.data(), x.data(), y.data(), saved.data(), scratch.data(), dy.data(),
                                             dxp, n);
                    } else {
                        // The layers' own pullbacks, last to first, with the chain's buffers.
                        [&]<std::size_t... I>(std::index_sequence<I...>) {
                            (([&] {
                                 constexpr std::size_t L = Net::num_layers - 1 - I;
                                 T* const buffer = scratch.data();
                                 T* dyl = L == Net::num_layers - 1 ? dy.data() : buffer + (L % 2) * Net::max_inner_width * n;
                                 T* dxl = L == 0 ? dxp : buffer + ((L - 1) % 2) * Net::max_inner_width * n;
                                 auto pull = [&]<bool add>() {
                                     detail::layer_pullback<add, typename Net::template layer<L>>(
                                         p.data() + Net::param_offset[L], g.data() + Net::param_offset[L],
                                         Net::template input<L>(x.data(), saved.data(), n),
                                         Net::template output<L>(y.data(), saved.data(), n),
                                         saved.data() + Net::saved_offset[L] * n,
                                         buffer + Net::layer_scratch_offset * n, dyl, dxl, n);
                                 };
                                 if (accumulate) pull.template operator()<true>();
                                 else pull.template operator()<false>();
                             }()),
                             ...);
                        }(std::make_index_sequence<Net::num_layers>{});
                    }
                    return std::pair{g, dx};
                };
                const auto [g_one, dx_one] = run(true);
                const auto [g_two, dx_two] = run(false);
                REQUIRE(g_one == g_two);
                if (with_dx) REQUIRE(dx_one == dx_two);
            }
    }
}

}  // namespace test_chain
