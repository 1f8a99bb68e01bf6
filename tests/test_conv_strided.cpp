// The strided Conv (kernels/conv_strided.hpp): the layer checker on odd sizes, the forward pass against
// the definition, the shape rule, and the strided kernels against their scalar twins on odd sizes.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/kernels/conv_strided.hpp"
#include "support.hpp"

namespace test_conv_strided {

using namespace chainlet;

namespace {

// The derivative passes' rules are test_conv_rules.cpp's.
template <class L, std::size_t H, std::size_t W, std::size_t C>
void require_layer_check_image(double tol = 1e-6) {
    LayerCheckOptions o;
    o.tolerance = tol;
    test::require_layer_check<L, Input<H, W, C>, RuleChecks::off>(o);
}

}  // namespace

TEST_CASE("Conv with stride: layer check and shape rule", "[conv][stride][gradient]") {
    using A = Conv<3, 3, 4, Tanh, Padding::valid, 2>::bound<Shape<9, 8, 2>>;
    STATIC_REQUIRE(std::is_same_v<A::out_shape, Shape<4, 3, 4>>);  // (9 - 3) / 2 + 1, (8 - 3) / 2 + 1 (floor)
    require_layer_check_image<Conv<3, 3, 4, Tanh, Padding::valid, 2>, 9, 8, 2>();
    require_layer_check_image<Conv<2, 3, 5, Softplus, Padding::valid, 3>, 7, 10, 3>();
    require_layer_check_image<Conv<4, 2, 6, ReLU, Padding::valid, 2>, 8, 5, 1>(1e-5);
}

TEST_CASE("Conv with stride: forward pass against the definition", "[conv][stride]") {
    constexpr std::size_t H = 9, W = 10, C = 2, KH = 3, KW = 2, OC = 5, S = 2;
    using B = Conv<KH, KW, OC, Tanh, Padding::valid, S>::bound<Shape<H, W, C>>;
    for (std::size_t n : {1, 4, 21}) {
        const auto p = test::random_vector(B::num_params, 9, 0.5);
        const auto x = test::random_vector(B::in_size * n, 10);
        std::vector<double> y(B::out_size * n), saved(B::saved_per_sample * n + 1);
        B::forward(p.data(), x.data(), y.data(), saved.data(), n);
        std::vector<double> ref(y.size());
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t oy = 0; oy < B::OH; ++oy)
                for (std::size_t ox = 0; ox < B::OW; ++ox)
                    for (std::size_t oc = 0; oc < OC; ++oc) {
                        double z = p[B::num_weights + oc];
                        for (std::size_t ky = 0; ky < KH; ++ky)
                            for (std::size_t kx = 0; kx < KW; ++kx)
                                for (std::size_t c = 0; c < C; ++c)
                                    z += p[((ky * KW + kx) * C + c) * OC + oc] *
                                         x[(((oy * S + ky) * W + ox * S + kx) * C + c) * n + s];
                        ref[((oy * B::OW + ox) * OC + oc) * n + s] = Tanh::value(z);
                    }
        REQUIRE(test::max_rel_diff(y, ref) < 1e-12);
    }
}

TEMPLATE_TEST_CASE("strided conv kernels equal their scalar twins on odd sizes", "[kernel][conv][stride]", float,
                   double) {
    using T = TestType;
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-13;
    // (IH, IW, IC, OH, OW, OC, KH, KW, SH, SW, DH, DW); IH, IW fit the taps exactly or with rows to spare.
    const std::vector<kernels::StridedConvShape> shapes = {
        {11, 1, 3, 5, 1, 7, 3, 1, 2, 1, 1, 1},  {13, 1, 2, 5, 1, 5, 3, 1, 2, 1, 2, 1},
        {9, 7, 3, 3, 3, 6, 3, 3, 3, 2, 1, 1},   {10, 9, 1, 4, 3, 9, 2, 3, 2, 3, 2, 1},
        {17, 1, 5, 15, 1, 3, 2, 1, 1, 1, 2, 1},
    };
    for (const auto& s : shapes)
        for (std::size_t n : {1, 7, 17, 37}) {
            INFO("IH=" << s.IH << " IW=" << s.IW << " IC=" << s.IC << " OC=" << s.OC << " n=" << n);
            REQUIRE((s.OH - 1) * s.SH + (s.KH - 1) * s.DH < s.IH);
            REQUIRE((s.OW - 1) * s.SW + (s.KW - 1) * s.DW < s.IW);
            const auto w = test::random_vector<T>(s.K() * s.OC, 1, 0.5);
            const auto b = test::random_vector<T>(s.OC, 2);
            const auto in = test::random_vector<T>(s.IH * s.IW * s.IC * n, 3);
            const auto dz = test::random_vector<T>(s.OH * s.OW * s.OC * n, 4);
            const std::size_t out_n = s.OH * s.OW * s.OC * n;
            std::vector<T> y(out_n), z(out_n), yr(out_n), zr(out_n);
            kernels::strided_conv_forward<Tanh>(s, w.data(), b.data(), in.data(), n, y.data(), z.data());
            kernels::strided_conv_forward_reference<Tanh>(s, w.data(), b.data(), in.data(), n, yr.data(), zr.data());
            REQUIRE(test::max_rel_diff(z, zr) < tol);
            REQUIRE(test::max_rel_diff(y, yr) < tol);
            auto g = test::random_vector<T>(s.K() * s.OC, 5), gr = g;  // adds into g
            kernels::strided_conv_weight_grad(s, in.data(), dz.data(), n, g.data());
            kernels::strided_conv_weight_grad_reference(s, in.data(), dz.data(), n, gr.data());
            REQUIRE(test::max_rel_diff(g, gr) < tol * 10);
            std::vector<T> din(in.size(), T(7)), dinr(in.size(), T(-3));  // overwritten
            kernels::strided_conv_input_grad(s, w.data(), dz.data(), n, din.data());
            kernels::strided_conv_input_grad_reference(s, w.data(), dz.data(), n, dinr.data());
            REQUIRE(test::max_rel_diff(din, dinr) < tol);
        }
}

TEST_CASE("crop_copy undoes pad_copy", "[kernel]") {
    const std::size_t H = 5, W = 3, C = 2, n = 7;
    const auto x = test::random_vector(H * W * C * n, 11);
    std::vector<double> padded((H + 3) * (W + 3) * C * n), back(x.size());
    kernels::pad_copy(x.data(), H, W, C, n, 1, 2, 2, 1, padded.data());
    kernels::crop_copy(static_cast<const double*>(padded.data()), H, W, C, n, 1, 2, 1, back.data());
    REQUIRE(back == x);
}

}  // namespace test_conv_strided
