// SiLU and GELUExact fused into Conv (the convolution epilogues, their vector tails): the layer checker.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_activations_fused_conv {

using namespace chainlet;

using ConvSilu = Conv<2, 2, 3, SiLU, Padding::same>;
using ConvGeluExact = Conv<2, 2, 3, GELUExact>;

TEMPLATE_TEST_CASE("SiLU and GELUExact fused into Conv: the layer checker", "[activation][gradient]", ConvSilu,
                   ConvGeluExact) {
    const auto r = check_layer<TestType, Input<4, 3, 2>>(test::odd_chunk_options());
    INFO(r.report());
    REQUIRE(r.passed());
}

}  // namespace test_activations_fused_conv
