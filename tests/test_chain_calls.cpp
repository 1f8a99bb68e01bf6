// Chain entry points: predict into the caller's buffer, batches that do not fill whole vectors
// (predict and value_and_gradient), predict into the buffer holding its input, and the size errors of
// the public entry points, with what was expected and what was given.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_chain_calls {

using namespace chainlet;

using Tiny = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;
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

}  // namespace test_chain_calls
