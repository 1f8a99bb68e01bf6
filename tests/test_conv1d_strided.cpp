// Conv1D with stride and dilation (the loop nest of kernels/conv_strided.hpp): the layer checker (finite
// differences in double, the contract's rules, float against double) on odd sizes; and Conv1D's forward
// pass, with and without stride and dilation, against the definition. The stride-1 layer checks are in
// test_conv1d.cpp.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_conv1d_strided {

using namespace chainlet;

namespace {

// The layer checker on L bound to InShape on chunks of 1, 3 and 17 samples; tol is looser for ReLU, whose
// kink a finite difference may cross. The derivative passes' rules are test_conv_rules.cpp's.
template <class L, class InShape>
void require_layer_check(double tol = 1e-6) {
    test::require_layer_check<L, Input<InShape::dims[0], InShape::dims[1]>, RuleChecks::off>(
        test::chunk_options({1, 3, 17}, tol));
}

// Conv1D straight from the definition: zero padding of (span - 1) / 2 in front for same.
template <std::size_t L, std::size_t C, std::size_t K, std::size_t OC, class Act, Padding Pad, std::size_t S, std::size_t D>
void check_conv1d_forward() {
    using B = typename Conv1D<K, OC, Act, Pad, S, D>::template bound<Shape<L, C>>;
    constexpr std::size_t span = D * (K - 1) + 1;
    constexpr long front = Pad == Padding::same ? static_cast<long>((span - 1) / 2) : 0;
    constexpr std::size_t OL = Pad == Padding::same ? L : (L - span) / S + 1;
    STATIC_REQUIRE(std::is_same_v<typename B::out_shape, Shape<OL, OC>>);
    for (std::size_t n : {1, 5, 19}) {
        const auto p = test::random_vector(B::num_params, 7, 0.5);
        const auto x = test::random_vector(B::in_size * n, 8);
        std::vector<double> y(B::out_size * n), saved(B::saved_per_sample * n);
        B::forward(p.data(), x.data(), y.data(), saved.data(), n);
        std::vector<double> ref(y.size());
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t l = 0; l < OL; ++l)
                for (std::size_t oc = 0; oc < OC; ++oc) {
                    double z = p[K * C * OC + oc];
                    for (std::size_t k = 0; k < K; ++k)
                        for (std::size_t c = 0; c < C; ++c) {
                            const long i = static_cast<long>(l * S + k * D) - front;
                            if (i < 0 || i >= static_cast<long>(L)) continue;
                            z += p[(k * C + c) * OC + oc] * x[(static_cast<std::size_t>(i) * C + c) * n + s];
                        }
                    ref[(l * OC + oc) * n + s] = Act::value(z);
                }
        INFO("L=" << L << " C=" << C << " K=" << K << " OC=" << OC << " stride=" << S << " dilation=" << D << " n=" << n);
        REQUIRE(test::max_rel_diff(y, ref) < 1e-12);
    }
}

}  // namespace

TEST_CASE("Conv1D: layer check with stride and dilation", "[conv1d][gradient]") {
    require_layer_check<Conv1D<3, 4, Tanh, Padding::valid, 2>, Shape<11, 3>>();         // covers the end exactly
    require_layer_check<Conv1D<3, 5, Identity, Padding::valid, 3>, Shape<12, 2>>();     // drops trailing positions
    require_layer_check<Conv1D<3, 2, Softplus, Padding::valid, 1, 2>, Shape<10, 3>>();  // dilation
    require_layer_check<Conv1D<4, 3, Sigmoid, Padding::same, 1, 3>, Shape<9, 2>>();     // padded dilation, span 10 > L
    require_layer_check<Conv1D<2, 6, Tanh, Padding::same, 1, 2>, Shape<8, 4>>();        // an even kernel dilated: span 3
    require_layer_check<Conv1D<3, 9, ReLU, Padding::valid, 2, 2>, Shape<13, 3>>(1e-5);  // both, OC with a tail block
}

TEST_CASE("Conv1D: forward pass against the definition", "[conv1d]") {
    check_conv1d_forward<11, 3, 3, 4, Tanh, Padding::valid, 1, 1>();
    check_conv1d_forward<9, 2, 4, 5, Identity, Padding::same, 1, 1>();
    check_conv1d_forward<12, 2, 3, 5, Identity, Padding::valid, 3, 1>();
    check_conv1d_forward<10, 3, 3, 6, Softplus, Padding::valid, 1, 2>();
    check_conv1d_forward<9, 2, 4, 3, Sigmoid, Padding::same, 1, 3>();
    check_conv1d_forward<8, 2, 2, 3, Tanh, Padding::same, 1, 2>();  // span 3
    check_conv1d_forward<5, 1, 4, 2, Identity, Padding::same, 1, 1>();
    check_conv1d_forward<13, 3, 3, 9, ReLU, Padding::valid, 2, 2>();
}

}  // namespace test_conv1d_strided
