// ELU, LeakyReLU, SiLU and GELUExact fused into Conv (the convolution epilogues, their vector tails):
// the layer checker, without the derivative rules (test_conv_rules.cpp; the activations' jets:
// test_activations_fused.cpp and test_input_derivatives.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_activations_fused_conv {

using namespace chainlet;

using ConvElu = Conv<2, 2, 3, ELU>;
using ConvLeaky = Conv<2, 2, 3, LeakyReLU<1, 5>>;
using ConvSilu = Conv<2, 2, 3, SiLU, Padding::same>;
using ConvGeluExact = Conv<2, 2, 3, GELUExact>;

TEMPLATE_TEST_CASE("ELU, LeakyReLU, SiLU and GELUExact fused into Conv: the layer checker", "[activation][gradient]",
                   ConvElu, ConvLeaky, ConvSilu, ConvGeluExact) {
    const auto r = check_layer<TestType, Input<4, 3, 2>, RuleChecks::off>(test::odd_chunk_options());
    INFO(r.report());
    REQUIRE(r.passed());
}

}  // namespace test_activations_fused_conv
