// The convolution kernels against their scalar twins on odd sizes (kernels/conv.hpp): the forward and
// input-gradient sweeps, and the parameter gradients in bands.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "chainlet/layers/conv.hpp"
#include "support.hpp"

namespace test_conv_kernels_sweeps {

using namespace chainlet;
TEMPLATE_TEST_CASE("conv kernels match their scalar twins on odd sizes", "[conv][kernel]", float, double) {
    using T = TestType;
    // 7 output channels: row blocks of 4, 2 and 1; 12: blocks of 6 (6 x 2 or 6 x 4 pixel tiles).
    constexpr std::size_t IW = 9, IC = 3, KH = 3, KW = 2, IH = 6;
    constexpr auto patch = kernels::patch_offsets<KH, KW, IC, IW>();
    for (std::size_t OC : {7, 12}) {
        const kernels::Stride w_stride{static_cast<std::ptrdiff_t>(OC)};
        for (std::size_t n : {1, 3, 16, 17, 33}) {
            const kernels::ConvShape s{IW, IC, IH - KH + 1, IW - KW + 1, OC, KH, KW, patch.data(), 0, IH, 0, IW};
            const auto w = test::random_vector<T>(s.K() * OC, 1), b = test::random_vector<T>(OC, 2);
            const auto in = test::random_vector<T>(IH * IW * IC * n, 3);
            const auto dz = test::random_vector<T>(s.OH * s.OW * OC * n, 4);
            std::vector<T> y1(s.OH * s.OW * OC * n), y2(y1.size()), z1(y1.size()), z2(y1.size());
            kernels::conv_valid<Tanh, kernels::Init::row_bias>(s, w.data(), 1, w_stride, in.data(), n, y1.data(),
                                                               b.data(), z1.data());
            kernels::conv_valid_reference<Tanh, kernels::Init::row_bias>(s, w.data(), 1, w_stride, in.data(), n,
                                                                         y2.data(), b.data(), z2.data());
            const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
            INFO(OC << " channels, n=" << n);
            REQUIRE(test::max_rel_diff(y1, y2) < tol);
            REQUIRE(test::max_rel_diff(z1, z2) < tol);
            auto g1 = test::random_vector<T>(s.K() * OC, 5), g2 = g1;
            kernels::conv_weight_grad(s, in.data(), dz.data(), n, g1.data());
            kernels::conv_weight_grad_reference(s, in.data(), dz.data(), n, g2.data());
            REQUIRE(test::max_rel_diff(g1, g2) < 10 * tol);
            std::vector<T> db1(OC, T(1)), db2(OC, T(1)), dz1 = dz;
            kernels::activation_pullback_channel_sums<Identity>(s.OH * s.OW, OC, dz1.data(), dz.data(), n, db1.data());
            REQUIRE(dz1 == dz);
            for (std::size_t p = 0; p < s.OH * s.OW; ++p)
                for (std::size_t c = 0; c < OC; ++c)
                    for (std::size_t j = 0; j < n; ++j) db2[c] += dz[(p * OC + c) * n + j];
            REQUIRE(test::max_rel_diff(db1, db2) < 10 * tol);
        }
    }
}

// conv_activation_parameter_grads runs the activation pullback, the bias sums and the weight gradient
// band by band when dz is larger than L1, carrying every accumulator from band to band: the results must
// be the bits of the two calls it replaces (and so the twin's values). Shapes that take bands: LeNet5's
// first convolution with 23 output rows (bands of 2 rows and a last band of 1; 2 x 6 tiles with 16 vector
// registers) and 4 channels of a 2-channel input (4 x 2 or 4 x 4 tiles); one and two vectors of samples.
// An odd sample count and a layer with too many accumulators take one pass (conv_band_rows is 0).
TEMPLATE_TEST_CASE("conv_activation_parameter_grads: in bands, the bits of the two passes it replaces", "[conv][kernel]",
                   float, double) {
    using T = TestType;
    constexpr std::size_t W = simd::width<T>;
    auto check = [&]<class Act, std::size_t IH, std::size_t IW, std::size_t IC, std::size_t K, std::size_t OC>(
                     std::size_t n, bool bands) {
        constexpr auto patch = kernels::patch_offsets<K, K, IC, IW>();
        const kernels::ConvShape s{IW, IC, IH - K + 1, IW - K + 1, OC, K, K, patch.data(), 0, IH, 0, IW};
        INFO(Act::name << " IC=" << IC << " OC=" << OC << " OH=" << s.OH << " n=" << n);
        REQUIRE((kernels::conv_band_rows<T>(s, n) > 0) == (bands && simd::enabled));
        const auto in = test::random_vector<T>(IH * IW * IC * n, 21 + n);
        const auto dy = test::random_vector<T>(s.OH * s.OW * OC * n, 22 + n);
        const auto act_s = test::random_vector<T>(dy.size(), 23 + n);  // stand-ins for outputs or z
        auto dz1 = dy, dz2 = dy, dz3 = dy;
        auto g1 = test::random_vector<T>(s.K() * OC + OC, 24), g2 = g1, g3 = g1;
        kernels::conv_activation_parameter_grads<Act>(s, in.data(), dz1.data(), act_s.data(), n, g1.data(),
                                                      g1.data() + s.K() * OC);
        kernels::activation_pullback_channel_sums<Act>(s.OH * s.OW, OC, dz2.data(), act_s.data(), n, g2.data() + s.K() * OC);
        // in bands every tile sweeps its pixels forward; in one pass every other tile sweeps backward
        if (kernels::conv_band_rows<T>(s, n) > 0)
            kernels::conv_weight_grad<kernels::Sweeps::forward>(s, in.data(), dz2.data(), n, g2.data());
        else
            kernels::conv_weight_grad(s, in.data(), dz2.data(), n, g2.data());
        REQUIRE(dz1 == dz2);
        REQUIRE(g1 == g2);
        // Given a buffer for dz in blocks of channels (taken without bands where conv_dz_blocks says so;
        // exactly the P * OC * n values it may use, NaN at first): the same dz, the same bits.
        {
            auto dz4 = dy;
            auto g4 = test::random_vector<T>(s.K() * OC + OC, 24);
            std::vector<T> blocks(dy.size(), std::numeric_limits<T>::quiet_NaN());
            kernels::conv_activation_parameter_grads<Act>(s, in.data(), dz4.data(), act_s.data(), n, g4.data(),
                                                          g4.data() + s.K() * OC, blocks.data());
            REQUIRE(dz4 == dz2);
            REQUIRE(g4 == g2);
            const bool blocked = kernels::conv_dz_blocks(OC) && kernels::conv_band_rows<T>(s, n) == 0;
            REQUIRE(std::isnan(blocks[0]) == !blocked);
        }
        // The reference: dz from the activation pullback in T, then the sums in double, and the error of
        // each sum relative to the sum of its terms' magnitudes (the scale of float's rounding). Measured
        // relative to the sum itself, a sum of 22,080 terms (2 x 16 samples x 23 x 30 pixels on AVX-512)
        // near cancellation was 2.5e-4 off in the kernel and 4e-4 in a reference summing in float; here
        // the kernel is at most 3.1e-8, and one product left out (~1 / 22,080 = 4.5e-5) would fail.
        std::vector<T> db3(OC);
        kernels::activation_pullback_channel_sums_reference<Act>(s.OH * s.OW, OC, dz3.data(), act_s.data(), n,
                                                                 db3.data());
        const auto as_double = [](const std::vector<T>& v, bool magnitude) {
            std::vector<double> d(v.size());
            for (std::size_t e = 0; e < v.size(); ++e) d[e] = magnitude ? std::abs(double(v[e])) : double(v[e]);
            return d;
        };
        double worst = 0;
        std::vector<double> sums[2];
        for (bool magnitude : {false, true}) {
            const auto in_d = as_double(in, magnitude), dz_d = as_double(dz3, magnitude);
            auto& g_d = sums[magnitude] = as_double(g3, magnitude);
            kernels::conv_weight_grad_reference(s, in_d.data(), dz_d.data(), n, g_d.data());
            for (std::size_t e = 0; e < dz_d.size(); ++e) g_d[s.K() * OC + (e / n) % OC] += dz_d[e];
        }
        for (std::size_t e = 0; e < g1.size(); ++e)
            worst = test::worse(worst, std::abs(double(g1[e]) - sums[0][e]) / sums[1][e]);
        REQUIRE(worst < (sizeof(T) == 4 ? 1e-6 : 1e-14));
    };
    // Bands need dz beyond 64 KiB: 23 x 24 x 6 x 16 floats is 212 KB; in double, 2 vectors of AVX2 are 8
    // samples (106 KB), one of AVX-512 8 too.
    constexpr bool dz_large_with_w = sizeof(T) * W * 23 * 24 * 6 > kernels::conv_band_min_bytes;
    check.template operator()<ReLU, 27, 28, 1, 5, 6>(2 * W, true);
    check.template operator()<Tanh, 27, 28, 1, 5, 6>(W, dz_large_with_w);
    check.template operator()<Softplus, 27, 28, 1, 5, 6>(2 * W, true);  // from z, through exp
    check.template operator()<ReLU, 27, 28, 1, 5, 6>(W + 3, false);      // a scalar tail: one pass
    check.template operator()<Tanh, 25, 32, 2, 3, 4>(2 * W, true);       // 23 x 30 x 4 rows, K = 18
    check.template operator()<ReLU, 20, 20, 6, 5, 16>(2 * W, false);     // K * OC = 2400 accumulators: one pass
    // dz in blocks of 4 channels (with 32 vector registers): LeNet5's second convolution, odd sizes with
    // a scalar tail, 8 and 12 channels
    check.template operator()<ReLU, 12, 12, 6, 5, 16>(W, false);
    check.template operator()<Softplus, 9, 11, 3, 3, 8>(W + 3, false);
    check.template operator()<Tanh, 7, 10, 5, 3, 12>(2 * W + 1, false);
}

}  // namespace test_conv_kernels_sweeps
