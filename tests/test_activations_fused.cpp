// ELU, LeakyReLU, SiLU, GELUExact and Sin fused into Dense (the gemm epilogues, their vector tails): the
// layer checker, with Dense's derivative rules (the activations' jets). The same activations fused into
// Conv are in test_activations_fused_conv.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_activations_fused {

using namespace chainlet;

using DenseElu = Dense<9, ELU>;
using DenseLeaky = Dense<9, LeakyReLU<>>;
using DenseSilu = Dense<9, SiLU>;
using DenseGeluExact = Dense<9, GELUExact>;
using DenseSin = Dense<9, Sin<3>>;

TEMPLATE_TEST_CASE("ELU, LeakyReLU, SiLU, GELUExact, Sin fused into Dense: the layer checker (and its derivative rules)",
                   "[activation][gradient]", DenseElu, DenseLeaky, DenseSilu, DenseGeluExact, DenseSin) {
    const auto r = check_layer<TestType, Input<6>>(test::odd_chunk_options());
    INFO(r.report());
    REQUIRE(r.passed());
}

}  // namespace test_activations_fused
