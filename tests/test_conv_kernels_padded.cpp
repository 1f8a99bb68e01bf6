// conv_valid on a zero-padded input against its scalar twin (kernels/conv.hpp), on odd sizes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "chainlet/layers/conv.hpp"
#include "support.hpp"

namespace test_conv_kernels_padded {

using namespace chainlet;
TEMPLATE_TEST_CASE("conv_valid on a zero-padded input (taps outside the window skipped, edge tiles as staircases or split, or the window alone) matches its twin",
                   "[conv][kernel]", CHAINLET_TEST_TYPES) {
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

}  // namespace test_conv_kernels_padded
