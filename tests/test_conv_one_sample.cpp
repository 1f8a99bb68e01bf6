// Conv's one-sample route (a single image at inference, an ODE right-hand side): its forward pass
// against the chunk route's and the definition. The pullback is in test_conv_one_sample_pullback.cpp.
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

namespace test_conv_one_sample {

using namespace chainlet;

// Whether simd::fma on vectors rounds once, as the scalar std::fma does: it does wherever the target has an
// FMA instruction (simd.hpp writes the instruction out); an x86-64 build without FMA (no -mfma)
// rounds a * b + c twice. Only then do the vector and the scalar routes give the same bits.
// (1 + e)^2 - (1 + 2e) with e = 2^-12 in float, 2^-27 in double: e^2 fused, 0 rounded twice.
template <class T>
bool vector_fma_rounds_once() {
    using V = simd::vec<T>;
    volatile T e = sizeof(T) == 4 ? T(1.0 / 4096) : T(1.0 / 134217728);
    const T a = T(1) + e, c = -(T(1) + 2 * e);
    T lanes[simd::width<T>];
    simd::storev(lanes, simd::fma(V(a), V(a), V(c)));
    return lanes[0] != T(0);
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
    const auto ref = test::reference_forward<L, H, W, C, KH, KW, OC, Act>(pd, std::vector<double>(x.begin(), x.end()), n);
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

}  // namespace test_conv_one_sample
