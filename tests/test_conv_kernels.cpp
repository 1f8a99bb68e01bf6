// The convolution kernels against their scalar twins on odd sizes (kernels/conv.hpp): the one-sample
// input and weight gradients, the weight gradient's register tiles, sliding tiles, sweeps and the
// weight gradient along the channels.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "chainlet/layers/conv.hpp"
#include "support.hpp"

namespace test_conv_kernels {

using namespace chainlet;

// conv_input_grad_one against its twin: pixel tiles of 4, 2 and 1 along a row (W = 7), channel blocks of
// 4 (or 2), 2 and 1 (C = 7 and 3), output channels of whole vectors only, a tail only and both (16 and
// 8 are one vector in float and double with AVX-512), kernels of one row or column, and a window of
// rows narrower than the padded image: the rows outside it are NaN for the kernel, which must not read
// them, and zero for the twin, which reads every row.
TEMPLATE_TEST_CASE("conv_input_grad_one matches its twin on odd sizes", "[conv][kernel]", float, double) {
    using T = TestType;
    for (std::size_t OC : {std::size_t(5), simd::width<T>, 2 * simd::width<T> + 3})
        for (std::size_t C : {7, 3})
            for (auto [KH, KW] : {std::pair<std::size_t, std::size_t>{3, 2}, {1, 5}, {4, 1}}) {
                constexpr std::size_t H = 5, W = 7;
                const std::size_t DH = H + KH - 1, DW = W + KW - 1, row0 = KH > 1 ? 1 : 0, row1 = DH - row0;
                auto dzp = test::random_vector<T>(DH * DW * OC, 30 + OC + C), dzp_nan = dzp;
                std::fill(dzp.begin(), dzp.begin() + row0 * DW * OC, T(0));
                std::fill(dzp.begin() + row1 * DW * OC, dzp.end(), T(0));
                const T nan = std::numeric_limits<T>::quiet_NaN();
                std::fill(dzp_nan.begin(), dzp_nan.begin() + row0 * DW * OC, nan);
                std::fill(dzp_nan.begin() + row1 * DW * OC, dzp_nan.end(), nan);
                const auto w = test::random_vector<T>(KH * KW * C * OC, 40 + OC);
                std::vector<T> dx(H * W * C, T(-1)), ref(H * W * C, T(-2));
                kernels::conv_input_grad_one(H, W, C, OC, KH, KW, DW, row0, row1, dzp_nan.data(), w.data(), dx.data());
                kernels::conv_input_grad_one_reference(H, W, C, OC, KH, KW, DW, dzp.data(), w.data(), ref.data());
                INFO("OC=" << OC << " C=" << C << " K=" << KH << "x" << KW);
                REQUIRE(test::max_rel_diff(dx, ref) < (sizeof(T) == 4 ? 1e-5 : 1e-13));
            }
}

// conv_weight_grad_one_along_pixels against its twin: kernels 5, 3, 7 and 2 wide (tiles of 5, of 3, of
// 4 + 2 + 1 and of 2 taps), 1-7 output channels (tiles of 3 + 3 + 1 or 2 + 2 + 2 + 1 and smaller), a
// padded width XW of OW + KW - 1 (a layer's) and wider, and pixel grids Q = (OH - 1) * XW + OW that end in
// whole vectors (Q = 16, 32), in a part vector or below one vector. The scratch holds exactly the OC * Q
// values the kernel may use and starts NaN: every value it reads, it must have written (and a write past
// it fails under ASan). g and db start non-zero (the kernel adds).
TEMPLATE_TEST_CASE("conv_weight_grad_one_along_pixels matches its twin on odd sizes", "[conv][kernel]", float, double) {
    using T = TestType;
    for (std::size_t OC : {1, 2, 5, 6, 7})
        for (auto [KH, KW] : {std::pair<std::size_t, std::size_t>{5, 5}, {2, 3}, {3, 7}, {1, 2}})
            for (auto [OH, OW, extra] : {std::array<std::size_t, 3>{24, 24, 0}, {3, 5, 2}, {1, 9, 0}, {2, 1, 3},
                                         {1, 16, 0}, {1, 32, 3}}) {
                const std::size_t XW = OW + KW - 1 + extra, XH = OH + KH - 1;
                const auto xp = test::random_vector<T>(XH * XW, 50 + OC + KW);
                const auto dz = test::random_vector<T>(OH * OW * OC, 60 + OH);
                const auto g0 = test::random_vector<T>(KH * KW * OC + OC, 70);
                const std::size_t Q = (OH - 1) * XW + OW;
                std::vector<T> g = g0, ref = g0, dzw(OC * Q, std::numeric_limits<T>::quiet_NaN());
                kernels::conv_weight_grad_one_along_pixels(OH, OW, XW, OC, KH, KW, xp.data(), dz.data(), dzw.data(),
                                                           g.data(), g.data() + KH * KW * OC);
                kernels::conv_weight_grad_one_along_pixels_reference(OH, OW, XW, OC, KH, KW, xp.data(), dz.data(),
                                                                     ref.data(), ref.data() + KH * KW * OC);
                INFO("OC=" << OC << " K=" << KH << "x" << KW << " OH=" << OH << " OW=" << OW << " XW=" << XW);
                // sums of up to 576 products, in another order than the twin's
                REQUIRE(test::max_rel_diff(g, ref) < (sizeof(T) == 4 ? 1e-4 : 1e-12));
            }
}



TEMPLATE_TEST_CASE("conv_weight_grad's register tiles match the twin", "[conv][kernel]", float, double) {
    // Output channels that pick each tile shape (6 x 4 for multiples of 4, 4 x 6 for other multiples of 6
    // in float with AVX-512; with AVX2 2 x 6 for multiples of 6 in float; 4 x 4, or 6 x 2 with 16
    // registers, and smaller otherwise), K = KH * KW * IC leaving every remainder of the row blocks (K % 6
    // from 0 to 5 for 6 x 4 and 6 x 2, K % 4 from 0 to 3 for 4 x 6), and sample counts of one vector,
    // less, and more with a tail (pairs of vectors, one vector left, and a scalar tail).
    using T = TestType;
    auto check = [&]<std::size_t IC, std::size_t KH, std::size_t KW, std::size_t OC>() {
        constexpr std::size_t IW = 7, IH = 6;
        constexpr auto patch = kernels::patch_offsets<KH, KW, IC, IW>();
        const kernels::ConvShape s{IW, IC, IH - KH + 1, IW - KW + 1, OC, KH, KW, patch.data(), 0, IH, 0, IW};
        for (std::size_t n : {std::size_t(1), std::size_t(5), simd::width<T>, simd::width<T> + 3, 2 * simd::width<T>,
                              3 * simd::width<T> + 5, 4 * simd::width<T>}) {
            const auto in = test::random_vector<T>(IH * IW * IC * n, 3 + n);
            const auto dz = test::random_vector<T>(s.OH * s.OW * OC * n, 4 + n);
            auto g1 = test::random_vector<T>(s.K() * OC, 5), g2 = g1;
            auto g3 = g1;
            kernels::conv_weight_grad(s, in.data(), dz.data(), n, g1.data());
            kernels::conv_weight_grad_reference(s, in.data(), dz.data(), n, g2.data());
            kernels::conv_weight_grad<kernels::Sweeps::forward>(s, in.data(), dz.data(), n, g3.data());
            INFO("IC=" << IC << " K=" << s.K() << " OC=" << OC << " n=" << n);
            REQUIRE(test::max_rel_diff(g1, g2) < (sizeof(T) == 4 ? 2e-4 : 1e-11));
            REQUIRE(test::max_rel_diff(g3, g2) < (sizeof(T) == 4 ? 2e-4 : 1e-11));
        }
    };
    check.template operator()<1, 3, 3, 8>();   // K = 9: 6 + 2 + 1 (6 x 4 tiles)
    check.template operator()<2, 2, 2, 16>();  // K = 8: 6 + 2
    check.template operator()<1, 2, 5, 8>();   // K = 10: 6 + 2 + 2
    check.template operator()<1, 5, 5, 8>();   // K = 25: 6 + 6 + 6 + 6 + 1
    check.template operator()<1, 1, 5, 4>();   // K = 5: 2 + 2 + 1
    check.template operator()<1, 5, 5, 6>();   // K = 25: 4 x 6, one left (LeNet5's first convolution)
    check.template operator()<2, 3, 1, 12>();  // K = 6: one block of 6 (6 x 4), 4 + 2 with 4 x 6
    check.template operator()<2, 2, 2, 6>();   // K = 8: 4 + 4
    check.template operator()<1, 1, 3, 6>();   // K = 3: 2 + 1
    check.template operator()<3, 1, 1, 5>();   // K = 3, OC = 5: 4 x 4 and smaller
    check.template operator()<2, 2, 3, 16>();  // K = 12: 6 + 6 with 16 registers
    check.template operator()<1, 5, 7, 8>();   // K = 35: 6 x 5 + 2 + 2 + 1 with 16 registers
}

// The one-input-channel route of conv_weight_grad (sliding tiles of P = 4 pixels, or 2 with two vectors of
// samples; groups of 3 output channels): every kernel width it takes (1 to 5), output rows of 1 to 7
// pixels (every remainder of P, and rows shorter than P), channel counts leaving groups of 1 and 2, one
// and two vectors of samples, against the twin; and the shapes it does not take (7 columns, two input
// channels, a scalar tail) still right.
TEMPLATE_TEST_CASE("conv_weight_grad's one-channel sliding tiles match the twin", "[conv][kernel]", float, double) {
    using T = TestType;
    constexpr std::size_t W = simd::width<T>;
    auto check = [&]<std::size_t IC, std::size_t KH, std::size_t KW, std::size_t OC>(std::size_t IW) {
        constexpr std::size_t IH = KH + 2;
        std::vector<std::uint32_t> patch(KH * KW * IC);
        kernels::patch_offsets(KH, KW, IC, IW, patch.data());
        const kernels::ConvShape s{IW, IC, IH - KH + 1, IW - KW + 1, OC, KH, KW, patch.data(), 0, IH, 0, IW};
        for (std::size_t n : {W, 2 * W, W + 1}) {
            INFO("IC=" << IC << " KH=" << KH << " KW=" << KW << " OC=" << OC << " OW=" << s.OW << " n=" << n);
            const bool taken = simd::enabled && simd::vector_registers >= 32 && IC == 1 && KW <= 5 && n % W == 0;
            REQUIRE(kernels::detail::conv_weight_grad_one_channel_fits<T>(s, n) == taken);
            const auto in = test::random_vector<T>(IH * IW * IC * n, 31 + n);
            const auto dz = test::random_vector<T>(s.OH * s.OW * OC * n, 32 + n);
            auto g1 = test::random_vector<T>(s.K() * OC, 33), g2 = g1;
            kernels::conv_weight_grad(s, in.data(), dz.data(), n, g1.data());
            kernels::conv_weight_grad_reference(s, in.data(), dz.data(), n, g2.data());
            REQUIRE(test::max_rel_diff(g1, g2) < (sizeof(T) == 4 ? 2e-5 : 1e-13));
        }
    };
    for (std::size_t OW = 1; OW <= 7; ++OW) {
        check.template operator()<1, 2, 1, 4>(OW);  // groups 3 + 1
        check.template operator()<1, 1, 2, 5>(OW + 1);  // 3 + 2
        check.template operator()<1, 3, 3, 6>(OW + 2);
        check.template operator()<1, 2, 4, 2>(OW + 3);
        check.template operator()<1, 5, 5, 7>(OW + 4);  // 3 + 3 + 1
    }
    check.template operator()<1, 3, 7, 6>(9);  // 7 columns: not taken
    check.template operator()<2, 3, 3, 6>(8);  // two input channels: not taken
}

TEMPLATE_TEST_CASE("conv_weight_grad: every other tile sweeps its pixels backward", "[conv][kernel]", float, double) {
    // The order of a sweep shows in a sum where it matters: dz is big (8 ulp of it exceed 1) at the first
    // output pixel, 1 at the pixels between and 0 at the last, and the image is all ones. Each lane of a
    // forward sweep adds the ones to big and loses them (big); a backward sweep adds the ones first and
    // big last (big + 62, rounded to a multiple of 8). LeNet5's second convolution (12 x 12 x 6, 5 x 5,
    // 16 channels: 64 output pixels), a chunk of one vector. Sweeps::forward gives big times the lanes for
    // every weight; the alternating sweeps (the default) give both sums, and each weight one of them.
    using T = TestType;
    constexpr std::size_t IW = 12, IH = 12, IC = 6, K = 5, OC = 16, n = simd::width<T>;
    constexpr auto patch = kernels::patch_offsets<K, K, IC, IW>();
    const kernels::ConvShape s{IW, IC, IH - K + 1, IW - K + 1, OC, K, K, patch.data(), 0, IH, 0, IW};
    const std::size_t pixels = s.OH * s.OW;
    const T big = std::ldexp(T(1), std::numeric_limits<T>::digits + 2);
    const std::vector<T> in(IH * IW * IC * n, T(1));
    std::vector<T> dz(pixels * OC * n, T(1));
    std::fill_n(dz.begin(), OC * n, big);                                   // the first pixel
    std::fill(dz.end() - static_cast<std::ptrdiff_t>(OC * n), dz.end(), T(0));  // the last
    const T lanes = static_cast<T>(n), forward = lanes * big, backward = lanes * (big + T(64));
    std::vector<T> g_forward(s.K() * OC, T(0)), g(s.K() * OC, T(0));
    kernels::conv_weight_grad<kernels::Sweeps::forward>(s, in.data(), dz.data(), n, g_forward.data());
    kernels::conv_weight_grad(s, in.data(), dz.data(), n, g.data());
    REQUIRE(std::all_of(g_forward.begin(), g_forward.end(), [&](T v) { return v == forward; }));
    REQUIRE(std::all_of(g.begin(), g.end(), [&](T v) { return v == forward || v == backward; }));
    REQUIRE(std::count(g.begin(), g.end(), backward) > 0);
    REQUIRE(std::count(g.begin(), g.end(), forward) > 0);
}

// The kernel out of line, once per type: it is always inlined, and with a shape known only at run time
// every tile it may take is compiled at each call.
template <class T>
[[gnu::noinline]] void weight_grad_along_channels(const kernels::ConvShape& s, const T* in, const T* dzt, std::size_t n,
                                                  T* g) {
    kernels::conv_weight_grad_along_channels(s, in, dzt, n, g);
}

// conv_weight_grad_along_channels: one or two vectors of output channels (OC = W, 2W), every kernel
// width it takes (1 to 5, so tiles of 1 to 5 columns), input channels that give every channel group
// (IC = 6: 3 with one vector of channels, 2 with two; 4: 2; 5 and 7: 1), odd and even output widths (a
// last single pixel per row, or none), and sample counts of one vector (compiled for it), fewer, and
// more with a tail. Where the build does not take the route (no AVX-512, the scalar build), fits must
// say so for every shape here.
TEMPLATE_TEST_CASE("conv_weight_grad_along_channels matches the twin", "[conv][kernel]", float, double) {
    using T = TestType;
    constexpr std::size_t W = simd::width<T>;
    auto check = [&]<std::size_t IC, std::size_t KH, std::size_t KW, std::size_t OC, std::size_t IH, std::size_t IW>() {
        constexpr auto patch = kernels::patch_offsets<KH, KW, IC, IW>();
        const kernels::ConvShape s{IW, IC, IH - KH + 1, IW - KW + 1, OC, KH, KW, patch.data(), 0, IH, 0, IW};
        const bool fits = kernels::conv_weight_grad_along_channels_fits<T>(s);
        REQUIRE(fits == (simd::enabled && simd::vector_registers >= 32 && OC % W == 0 && OC / W <= 2 && KW <= 5));
        if (!fits) return;
        const std::size_t P = s.OH * s.OW;
        for (std::size_t n : {std::size_t(1), std::size_t(5), W, W + 3, 2 * W}) {
            const auto in = test::random_vector<T>(IH * IW * IC * n, 7 + n);
            const auto dz = test::random_vector<T>(P * OC * n, 8 + n);
            std::vector<T> dzt(dz.size(), std::numeric_limits<T>::quiet_NaN());
            kernels::transpose_channels_samples(P, OC, n, dz.data(), dzt.data());
            bool transposed = true;
            for (std::size_t p = 0; p < P; ++p)
                for (std::size_t c = 0; c < OC; ++c)
                    for (std::size_t j = 0; j < n; ++j)
                        transposed = transposed && dzt[(p * n + j) * OC + c] == dz[(p * OC + c) * n + j];
            auto g1 = test::random_vector<T>(s.K() * OC, 9), g2 = g1;
            weight_grad_along_channels(s, in.data(), dzt.data(), n, g1.data());
            kernels::conv_weight_grad_reference(s, in.data(), dz.data(), n, g2.data());
            INFO("IC=" << IC << " K=" << KH << "x" << KW << " OC=" << OC << " OW=" << s.OW << " n=" << n);
            REQUIRE(transposed);
            REQUIRE(test::max_rel_diff(g1, g2) < (sizeof(T) == 4 ? 2e-4 : 1e-11));
        }
    };
    check.template operator()<6, 5, 5, W, 12, 12>();      // LeNet5's second convolution in float
    check.template operator()<6, 5, 5, 2 * W, 10, 11>();  // two vectors of channels, OW = 7
    check.template operator()<4, 3, 4, W, 6, 9>();        // 2 channels per tile, OW = 6
    check.template operator()<5, 2, 3, W, 5, 9>();        // one channel per tile, OW = 7
    check.template operator()<7, 1, 2, 2 * W, 3, 6>();
    check.template operator()<2, 3, 1, W, 4, 3>();        // one kernel column, OW = 3
    check.template operator()<1, 4, 5, W, 6, 6>();        // one input channel, OW = 2
    check.template operator()<3, 2, 5, 3 * W, 4, 8>();    // three vectors of channels: not taken
    check.template operator()<3, 2, 7, W, 4, 8>();        // a kernel of 7 columns: not taken
}

}  // namespace test_conv_kernels
