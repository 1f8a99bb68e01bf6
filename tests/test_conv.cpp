// Conv: finite-difference gradients in double (valid and same padding, odd image sizes, one and several
// samples, with activations), the forward pass against a plain scalar convolution, and the SIMD
// convolution kernels against their scalar twins.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "chainlet/layers/conv.hpp"
#include "support.hpp"

namespace test_conv {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

namespace {

// Plain convolution straight from the definition, on sample-major-free indexing of a feature-major chunk.
template <class L, std::size_t H, std::size_t W, std::size_t C, std::size_t KH, std::size_t KW, std::size_t OC, class Act>
std::vector<double> reference_forward(const std::vector<double>& p, const std::vector<double>& x, std::size_t n) {
    std::vector<double> y(L::out_size * n);
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t oy = 0; oy < L::OH; ++oy)
            for (std::size_t ox = 0; ox < L::OW; ++ox)
                for (std::size_t oc = 0; oc < OC; ++oc) {
                    double z = p[L::num_weights + oc];
                    for (std::size_t ky = 0; ky < KH; ++ky)
                        for (std::size_t kx = 0; kx < KW; ++kx)
                            for (std::size_t c = 0; c < C; ++c) {
                                const long iy = static_cast<long>(oy + ky) - static_cast<long>(L::pad_top);
                                const long ix = static_cast<long>(ox + kx) - static_cast<long>(L::pad_left);
                                if (iy < 0 || ix < 0 || iy >= static_cast<long>(H) || ix >= static_cast<long>(W)) continue;
                                z += p[((ky * KW + kx) * C + c) * OC + oc] *
                                     x[((static_cast<std::size_t>(iy) * W + static_cast<std::size_t>(ix)) * C + c) * n + s];
                            }
                    y[((oy * L::OW + ox) * OC + oc) * n + s] = Act::value(z);
                }
    return y;
}

// tol: 1e-6 for smooth activations. With ReLU a perturbation of 1e-5 can move a pre-activation across
// the kink, where the finite difference itself is off by a little; 1e-5 leaves room for that.
template <std::size_t H, std::size_t W, std::size_t C, std::size_t KH, std::size_t KW, std::size_t OC, class Act, Padding Pad>
void check_conv(double tol = 1e-6) {
    using L = typename Conv<KH, KW, OC, Act, Pad>::template bound<Shape<H, W, C>>;
    for (std::size_t n : {1, 3, 17}) {
        INFO("H=" << H << " W=" << W << " C=" << C << " K=" << KH << "x" << KW << " OC=" << OC << " n=" << n
                  << " same=" << (Pad == Padding::same));
        REQUIRE(test::layer_gradient_error<L>(n, 100 + n) < tol);
        const auto p = test::random_vector(L::num_params, 5, 0.5);
        const auto x = test::random_vector(L::in_size * n, 6);
        std::vector<double> y(L::out_size * n), saved(L::saved_per_sample * n);
        L::forward(p.data(), x.data(), y.data(), saved.data(), n);
        REQUIRE(test::max_rel_diff(y, reference_forward<L, H, W, C, KH, KW, OC, Act>(p, x, n)) < 1e-12);
    }
}

}  // namespace

TEST_CASE("Conv gradients (double, finite differences) and forward pass, valid padding", "[conv][gradient]") {
    check_conv<7, 6, 1, 3, 3, 2, Identity, Padding::valid>();
    check_conv<9, 7, 3, 5, 5, 6, ReLU, Padding::valid>(1e-5);
    check_conv<6, 9, 2, 2, 3, 5, Tanh, Padding::valid>();
    check_conv<5, 5, 2, 1, 1, 3, GELU, Padding::valid>();
    // one and two vectors of output channels in double with AVX-512 (the weight gradient along the
    // channels, Conv::along_channels): 3 input channels per tile, odd output width 5
    check_conv<6, 7, 3, 3, 3, 8, Tanh, Padding::valid>();
}

TEST_CASE("Conv gradients (double, finite differences) and forward pass, same padding", "[conv][gradient]") {
    check_conv<7, 6, 1, 3, 3, 2, Identity, Padding::same>();
    check_conv<6, 5, 3, 5, 5, 4, Sigmoid, Padding::same>();
    check_conv<5, 6, 3, 3, 3, 19, Tanh, Padding::same>();  // one sample: vector tiles and tails along 19 channels
    check_conv<5, 6, 2, 2, 4, 3, Softplus, Padding::same>();  // even kernel: one more at the bottom/right
    check_conv<6, 8, 2, 2, 5, 16, Softplus, Padding::same>();  // along the channels, 2 vectors in double
}

// A chunk of one sample runs its own route (vectors along the output channels, Conv::forward_one).
// Its outputs and pre-activations must be those of the same sample inside a chunk of 3 (conv_valid,
// vectors along the samples) and of the definition. Channel counts for the tiles of gemm_nn's panel
// (with AVX-512: float 16 lanes, double 8): 37 (float: 2 vectors, a quarter, a scalar; double: a full
// 4-vector tile, a half, a scalar), 72 (float: a full tile and a half; double: 2 full tiles and one
// vector), 88 (float: a full tile, one vector and a half; double: 2 full tiles and 3 vectors), 16, 6
// and a Conv1D of 32; the GELU layers keep z in saved, after the padded input. One input channel with
// fewer output channels than a vector runs its vectors along the pixels of a row instead (6 and 5 in
// float and in double with AVX-512; 3 also in double with AVX2's 4 lanes). With valid padding both
// routes add every product in the order of k from the bias, as the chunk does: the same pre-activations
// to the bit where vector and scalar FMAs both round once (the activation's scalar and vector forms may
// round differently: GELU).
// Whether simd::fma on vectors rounds once, as the scalar std::fma does: xsimd writes it as a * b + c,
// which GCC fuses only when it optimises at -O2 or more (not in the -O0 sanitizer build). Only then do
// the vector and the scalar routes give the same bits. (1 + e)^2 - (1 + 2e) with e = 2^-12 in float,
// 2^-27 in double: e^2 fused, 0 rounded twice.
template <class T>
bool vector_fma_rounds_once() {
    using V = simd::vec<T>;
    volatile T e = sizeof(T) == 4 ? T(1.0 / 4096) : T(1.0 / 134217728);
    const T a = T(1) + e, c = -(T(1) + 2 * e);
    T lanes[simd::width<T>];
    simd::storev(lanes, simd::fma(V(a), V(a), V(c)));
    return lanes[0] != T(0);
}

template <class T, std::size_t H, std::size_t W, std::size_t C, std::size_t KH, std::size_t KW, std::size_t OC, class Act,
          Padding Pad>
void check_one_sample_forward() {
    using L = typename Conv<KH, KW, OC, Act, Pad>::template bound<Shape<H, W, C>>;
    INFO("H=" << H << " W=" << W << " C=" << C << " K=" << KH << "x" << KW << " OC=" << OC);
    constexpr std::size_t n = 3;
    const auto p = test::random_vector<T>(L::num_params, 7, 0.5);
    const auto x = test::random_vector<T>(L::in_size * n, 8);
    std::vector<T> y(L::out_size * n), saved(L::saved_per_sample * n);
    L::forward(p.data(), x.data(), y.data(), saved.data(), n);
    const auto pd = std::vector<double>(p.begin(), p.end());
    const auto ref = reference_forward<L, H, W, C, KH, KW, OC, Act>(pd, std::vector<double>(x.begin(), x.end()), n);
    const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
    for (std::size_t s = 0; s < n; ++s) {
        INFO("sample " << s);
        std::vector<T> x1(L::in_size), y1(L::out_size), saved1(L::saved_per_sample);
        for (std::size_t f = 0; f < L::in_size; ++f) x1[f] = x[f * n + s];
        L::forward(p.data(), x1.data(), y1.data(), saved1.data(), 1);
        std::vector<T> y3(L::out_size), r(L::out_size);
        for (std::size_t f = 0; f < L::out_size; ++f) {
            y3[f] = y[f * n + s];
            r[f] = static_cast<T>(ref[f * n + s]);
        }
        REQUIRE(test::max_rel_diff(y1, y3) < tol);
        // the same sums: exact for the pre-activation, and for an activation every form of which rounds alike
        const bool exact = Pad == Padding::valid && vector_fma_rounds_once<T>();
        if constexpr (std::is_same_v<Act, ReLU> || std::is_same_v<Act, Identity>)
            if (exact) REQUIRE(y1 == y3);
        REQUIRE(test::max_rel_diff(y1, r) < tol);
        if constexpr (!Act::derivative_from_output) {
            std::vector<T> z1(saved1.end() - L::out_size, saved1.end()), z3(L::out_size);
            for (std::size_t f = 0; f < L::out_size; ++f) z3[f] = saved[(L::saved_per_sample - L::out_size + f) * n + s];
            REQUIRE(test::max_rel_diff(z1, z3) < tol);
            if (exact) REQUIRE(z1 == z3);
        }
    }
}

TEMPLATE_TEST_CASE("Conv forward of one sample (vectors along the channels) equals the chunk's and the definition",
                   "[conv][kernel]", float, double) {
    using T = TestType;
    check_one_sample_forward<T, 5, 6, 3, 3, 3, 37, Tanh, Padding::same>();
    check_one_sample_forward<T, 4, 7, 2, 2, 3, 16, ReLU, Padding::valid>();
    check_one_sample_forward<T, 3, 5, 2, 2, 2, 72, Tanh, Padding::same>();
    check_one_sample_forward<T, 4, 3, 3, 2, 2, 88, Identity, Padding::valid>();
    check_one_sample_forward<T, 9, 8, 1, 5, 5, 6, GELU, Padding::same>();
    check_one_sample_forward<T, 1, 12, 4, 1, 5, 32, ReLU, Padding::same>();  // a Conv1D's shape
    // one input channel and fewer output channels than a vector (Conv::forward_one_along_pixels): LeNet5's
    // first convolution, and a row of 68 outputs (a block of 64 pixels, then 4)
    check_one_sample_forward<T, 28, 28, 1, 5, 5, 6, ReLU, Padding::valid>();
    check_one_sample_forward<T, 2, 70, 1, 1, 3, 5, GELU, Padding::valid>();
    check_one_sample_forward<T, 5, 9, 1, 3, 3, 3, GELU, Padding::same>();
}

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
                   "[conv][gradient]", float, double) {
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

TEST_CASE("Conv shapes", "[conv]") {
    using A = Conv<5, 5, 6, ReLU>::bound<Shape<28, 28, 1>>;
    STATIC_REQUIRE(std::is_same_v<A::out_shape, Shape<24, 24, 6>>);
    STATIC_REQUIRE(A::num_params == 5 * 5 * 6 + 6);
    using B = Conv<5, 5, 6, ReLU, Padding::same>::bound<Shape<28, 28, 1>>;
    STATIC_REQUIRE(std::is_same_v<B::out_shape, Shape<28, 28, 6>>);
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

TEMPLATE_TEST_CASE("conv_valid on a zero-padded input (taps outside the window skipped, edge tiles as staircases or split, or the window alone) matches its twin",
                   "[conv][kernel]", float, double) {
    // Two geometries: the input gradient of a valid convolution (KW - 1 zero columns and KH - 1 zero
    // rows on each side) and the forward pass of a "same" one (1 column left, 2 right, 1 row above and
    // below for a 3 x 4 kernel). The 4-pixel tiles at the edges then have pixels with different first
    // taps (left edge: a joining staircase), different last taps (right edge: a leaving staircase), or
    // both (a tile reaching both edges, inner width 2 in the first geometry: split in two); inner widths
    // 5 to 7 give last taps 4,3,2,1 / 4,4,3,2 / 4,4,4,3 (stages of no taps), the same geometry repeated
    // first taps (1,0,0,0). 7 output channels: row blocks of 4, 2 and 1; 6 and 12: blocks of 6; n = 17:
    // a scalar tail.
    using T = TestType;
    constexpr std::size_t IC = 3, KH = 3, KW = 4;
    const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
    // Sizes at run time: one instantiation of conv_valid's tiles per call below instead of one per
    // geometry (with the 9 geometries as template arguments, this file took 293 s in the sanitizer build).
    auto check = [&](std::size_t inner_w, std::size_t left, std::size_t right, std::size_t top, std::size_t OC = 7) {
        const std::size_t IW = inner_w + left + right, IH = 4 + 2 * top;
        std::vector<std::uint32_t> patch(KH * KW * IC);
        kernels::patch_offsets(KH, KW, IC, IW, patch.data());
        const kernels::ConvShape s{IW, IC, IH - KH + 1, IW - KW + 1, OC, KH, KW, patch.data(),
                                   top, IH - top, left, IW - right};
        const kernels::Stride w_stride{static_cast<std::ptrdiff_t>(OC)};
        for (std::size_t n : {1, 16, 17}) {
            auto in = test::random_vector<T>(IH * IW * IC * n, 3);
            for (std::size_t y = 0; y < IH; ++y)
                for (std::size_t x = 0; x < IW; ++x)
                    if (y < s.row0 || y >= s.row1 || x < s.col0 || x >= s.col1)
                        std::fill_n(in.begin() + static_cast<std::ptrdiff_t>((y * IW + x) * IC * n), IC * n, T(0));
            const auto w = test::random_vector<T>(s.K() * OC, 1);
            INFO("inner width " << inner_w << ", padding " << left << "/" << right << ", " << OC << " channels, n=" << n);
            std::vector<T> y1(s.OH * s.OW * OC * n), y2(y1.size()), y_union(y1.size());
            kernels::conv_valid<kernels::NoEpilogue, kernels::Init::zero>(s, w.data(), 1, w_stride, in.data(), n,
                                                                 y1.data(), nullptr, nullptr);
            kernels::conv_valid_reference<kernels::NoEpilogue, kernels::Init::zero>(s, w.data(), 1, w_stride, in.data(),
                                                                           n, y2.data(), static_cast<const T*>(nullptr),
                                                                           static_cast<T*>(nullptr));
            REQUIRE(test::max_rel_diff(y1, y2) < tol);
            // Every tile over the union of its pixels' taps (Edges::union_of_taps) adds only products with
            // zeros beyond the staircases: the same bits, up to the sign of an exact zero (a full tile
            // starts with its first product, a staircase from +0), which == does not see.
            kernels::conv_valid<kernels::NoEpilogue, kernels::Init::zero, kernels::Edges::union_of_taps>(s, w.data(), 1, w_stride, in.data(),
                                                                        n, y_union.data(), nullptr, nullptr);
            REQUIRE(y1 == y_union);
            // With a bias and an activation (the forward pass of a "same" convolution).
            const auto b = test::random_vector<T>(OC, 2);
            std::vector<T> a1(y1.size()), a2(y1.size()), a3(y1.size()), z1(y1.size()), z2(y1.size()), z3(y1.size());
            kernels::conv_valid<Tanh, kernels::Init::row_bias>(s, w.data(), 1, w_stride, in.data(), n, a1.data(),
                                                               b.data(), z1.data());
            kernels::conv_valid_reference<Tanh, kernels::Init::row_bias>(s, w.data(), 1, w_stride, in.data(), n,
                                                                         a2.data(), b.data(), z2.data());
            kernels::conv_valid<Tanh, kernels::Init::row_bias, kernels::Edges::union_of_taps>(s, w.data(), 1, w_stride, in.data(), n,
                                                                      a3.data(), b.data(), z3.data());
            REQUIRE(test::max_rel_diff(a1, a2) < tol);
            REQUIRE(test::max_rel_diff(z1, z2) < tol);
            REQUIRE(a1 == a3);
            REQUIRE(z1 == z3);
            // The same image written by pad_copy_sides into a buffer of NaNs: the rows it leaves unwritten
            // must be rows conv_valid never reads, so the result is the same to the bit.
            const std::size_t H = s.row1 - s.row0, row = IC * n;
            std::vector<T> inner(H * inner_w * row), sides(in.size(), std::numeric_limits<T>::quiet_NaN()), y3(y1.size());
            for (std::size_t y = 0; y < H; ++y)
                std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(((y + s.row0) * IW + s.col0) * row), inner_w * row,
                            inner.begin() + static_cast<std::ptrdiff_t>(y * inner_w * row));
            kernels::pad_copy_sides(inner.data(), H, inner_w, IC, n, s.row0, s.col0, IW - s.col1, sides.data());
            kernels::conv_valid<kernels::NoEpilogue, kernels::Init::zero>(s, w.data(), 1, w_stride, sides.data(), n,
                                                                 y3.data(), nullptr, nullptr);
            REQUIRE(y3 == y1);
            // The window alone (ConvShape::window_only), in a buffer of exactly its size: no tile may read
            // a padding column (it is not there: the address would fall in the row before, or outside the
            // buffer, which ASan reports), and the sums are the same, to the bit. The twin, reading zeros
            // for the padding, is the padded image's twin to the bit too.
            std::vector<std::uint32_t> window_patch(KH * KW * IC);
            kernels::patch_offsets(KH, KW, IC, inner_w, window_patch.data());
            kernels::ConvShape sw = s;
            sw.IW = inner_w;
            sw.patch = window_patch.data();
            sw.window_only = true;
            std::vector<T> y4(y1.size()), y5(y1.size()), a4(y1.size()), z4(y1.size()), a5(y1.size()), z5(y1.size());
            kernels::conv_valid<kernels::NoEpilogue, kernels::Init::zero, kernels::Edges::window_only>(
                sw, w.data(), 1, w_stride, inner.data(), n, y4.data(), nullptr, nullptr);
            REQUIRE(y4 == y1);
            kernels::conv_valid<Tanh, kernels::Init::row_bias, kernels::Edges::window_only>(
                sw, w.data(), 1, w_stride, inner.data(), n, a4.data(), b.data(), z4.data());
            REQUIRE(a4 == a1);
            REQUIRE(z4 == z1);
            kernels::conv_valid_reference<kernels::NoEpilogue, kernels::Init::zero>(
                sw, w.data(), 1, w_stride, inner.data(), n, y5.data(), static_cast<const T*>(nullptr), static_cast<T*>(nullptr));
            REQUIRE(y5 == y2);
            kernels::conv_valid_reference<Tanh, kernels::Init::row_bias>(sw, w.data(), 1, w_stride, inner.data(), n,
                                                                         a5.data(), b.data(), z5.data());
            REQUIRE(a5 == a2);
            REQUIRE(z5 == z2);
        }
    };
    for (std::size_t inner_w : {2, 5, 6, 7, 9, 12}) check(inner_w, KW - 1, KW - 1, KH - 1);  // input gradient
    for (std::size_t inner_w : {5, 8, 11}) check(inner_w, 1, 2, 1);  // a "same" convolution's forward pass
    check(7, KW - 1, KW - 1, KH - 1, 6);
    check(2, KW - 1, KW - 1, KH - 1, 12);
    check(8, 1, 2, 1, 6);
}

// pullback_from_rows (layer.hpp; a chain calls it when a MaxPool follows): the layer checker's rule, the
// bits of rows(0, height, dy) followed by the pullback, for row blocks of 1, 2 and 3, with and without dx,
// on chunks where the parameter gradients run in bands (each band's cotangent then produced into scratch)
// and on chunks where they do not (the cotangent produced whole).
TEMPLATE_TEST_CASE("Conv pullback_from_rows: band by band, the bits of the whole cotangent's pullback", "[conv][gradient]",
                   float, double) {
    using T = TestType;
    constexpr std::size_t W = simd::width<T>;
    auto check = [&]<class L>(std::size_t n, bool bands) {
        INFO("OH=" << L::OH << " OW=" << L::OW << " OC=" << L::out_shape::dims[2] << " same=" << L::same << " n=" << n);
        REQUIRE((kernels::conv_band_rows<T>(L::forward_shape, n) > 0) == (bands && simd::enabled));
        const auto p = test::random_vector(L::num_params, 31 + n, 0.5);
        const auto x = test::random_vector(L::in_size * n, 32 + n);
        const auto w = test::random_vector(L::out_size * n, 33 + n);
        const auto g0 = test::random_vector(L::num_params, 34 + n);
        const std::string e = detail::check_pullback_from_rows<L, T>(p, x, w, g0, n, Pass{});
        INFO(e);
        REQUIRE(e.empty());
    };
    using LeNetFirst = Conv<5, 5, 6, ReLU>::bound<Shape<28, 28, 1>>;
    using OddSoftplus = Conv<5, 5, 6, Softplus>::bound<Shape<27, 28, 1>>;    // z saved; 23 rows
    using SameTanh = Conv<3, 3, 4, Tanh, Padding::same>::bound<Shape<25, 30, 2>>;  // the padded input saved
    check.template operator()<LeNetFirst>(W, sizeof(T) * W * 24 * 24 * 6 > kernels::conv_band_min_bytes);
    check.template operator()<LeNetFirst>(2 * W, true);
    check.template operator()<LeNetFirst>(W + 3, false);  // a scalar tail: no bands
    check.template operator()<OddSoftplus>(2 * W, true);
    check.template operator()<SameTanh>(2 * W, true);
    check.template operator()<SameTanh>(1, false);        // one sample: its own route
}

}  // namespace test_conv
