// Conv's one-sample route (a single image at inference, an ODE right-hand side): its pullback against
// the chunk route's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "chainlet/layers/conv.hpp"
#include "conv_reference.hpp"
#include "support.hpp"

namespace test_conv_one_sample_pullback {

using namespace chainlet;

// The pullback of one sample (Conv::pullback_one: dW by gemm_nn along the output channels, or along the
// pixels for one input channel and fewer output channels than a vector, dx by conv_input_grad_one)
// against the chunk route (conv_activation_parameter_grads, conv_valid along the samples) on the same
// three samples: dz and dx sample by sample, and the parameter gradient of the three one-sample
// pullbacks added into one g against the chunk's (both starting from the same non-zero g).
// The shapes of the forward test above (vector tiles and tails of the channel dimension), same padding
// with an even kernel (unequal padding of dz), and a layer without input gradient (dx null).
template <class T, std::size_t H, std::size_t W, std::size_t C, std::size_t KH, std::size_t KW, std::size_t OC, class Act,
          Padding Pad>
void check_one_sample_pullback(bool want_dx = true) {
    using L = typename Conv<KH, KW, OC, Act, Pad>::template bound<Shape<H, W, C>>;
    INFO("H=" << H << " W=" << W << " C=" << C << " K=" << KH << "x" << KW << " OC=" << OC << " dx=" << want_dx);
    constexpr std::size_t n = 3;
    const auto p = test::random_vector<T>(L::num_params, 17, 0.5);
    const auto x = test::random_vector<T>(L::in_size * n, 18);
    auto dy = test::random_vector<T>(L::out_size * n, 19);
    const auto g0 = test::random_vector<T>(L::num_params, 20);
    std::vector<T> y(L::out_size * n), saved(L::saved_per_sample * n), scratch(L::scratch_per_sample * n);
    std::vector<T> dx(L::in_size * n), g = g0, g_one = g0;
    L::forward(p.data(), x.data(), y.data(), saved.data(), n);
    const auto dy_chunk = dy;
    L::pullback(p.data(), g.data(), x.data(), y.data(), saved.data(), scratch.data(), dy.data(),
                want_dx ? dx.data() : nullptr, n);
    const double tol = sizeof(T) == 4 ? 1e-4 : 1e-12;
    for (std::size_t s = 0; s < n; ++s) {
        INFO("sample " << s);
        std::vector<T> x1(L::in_size), y1(L::out_size), saved1(L::saved_per_sample), scratch1(L::scratch_per_sample);
        std::vector<T> dy1(L::out_size), dx1(L::in_size, T(7)), dz3(L::out_size), dx3(L::in_size);
        for (std::size_t f = 0; f < L::in_size; ++f) x1[f] = x[f * n + s];
        for (std::size_t f = 0; f < L::out_size; ++f) dy1[f] = dy_chunk[f * n + s];
        L::forward(p.data(), x1.data(), y1.data(), saved1.data(), 1);
        L::pullback(p.data(), g_one.data(), x1.data(), y1.data(), saved1.data(), scratch1.data(), dy1.data(),
                    want_dx ? dx1.data() : nullptr, 1);
        for (std::size_t f = 0; f < L::out_size; ++f) dz3[f] = dy[f * n + s];
        REQUIRE(test::max_rel_diff(dy1, dz3) < tol);
        if (want_dx) {
            for (std::size_t f = 0; f < L::in_size; ++f) dx3[f] = dx[f * n + s];
            REQUIRE(test::max_rel_diff(dx1, dx3) < tol);
        } else {
            REQUIRE(std::all_of(dx1.begin(), dx1.end(), [](T v) { return v == T(7); }));
        }
    }
    REQUIRE(test::max_rel_diff(g_one, g) < tol);
}

TEMPLATE_TEST_CASE("Conv pullback of one sample (vectors along the channels or pixels) equals the chunk's",
                   "[conv][gradient]", CHAINLET_TEST_TYPES) {
    using T = TestType;
    check_one_sample_pullback<T, 5, 6, 3, 3, 3, 37, Tanh, Padding::same>();
    check_one_sample_pullback<T, 4, 7, 2, 2, 3, 16, ReLU, Padding::valid>();
    check_one_sample_pullback<T, 3, 5, 2, 2, 2, 72, Tanh, Padding::same>();
    check_one_sample_pullback<T, 4, 3, 3, 2, 2, 88, Identity, Padding::valid>();
    check_one_sample_pullback<T, 9, 8, 1, 5, 5, 6, GELU, Padding::same>();
    check_one_sample_pullback<T, 5, 6, 2, 2, 4, 3, Softplus, Padding::same>();   // even kernel
    check_one_sample_pullback<T, 12, 12, 6, 5, 5, 16, ReLU, Padding::valid>();   // LeNet5's second convolution
    check_one_sample_pullback<T, 28, 28, 1, 5, 5, 6, ReLU, Padding::valid>(false);  // its first, no dx
    check_one_sample_pullback<T, 7, 11, 1, 3, 4, 5, Tanh, Padding::valid>();    // one channel, with dx
    check_one_sample_pullback<T, 6, 9, 1, 3, 3, 7, ReLU, Padding::same>();
    check_one_sample_pullback<T, 1, 12, 4, 1, 5, 32, ReLU, Padding::same>();     // a Conv1D's shape
}

}  // namespace test_conv_one_sample_pullback
