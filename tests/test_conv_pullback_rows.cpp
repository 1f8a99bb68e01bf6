// Conv's pullback_from_rows (the route a following MaxPool takes): band by band, the bits of the whole
// cotangent's pullback.
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

namespace test_conv_pullback_rows {

using namespace chainlet;

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

}  // namespace test_conv_pullback_rows
