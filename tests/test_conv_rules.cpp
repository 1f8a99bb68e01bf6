// The convolutions in the derivative passes (layers/conv_rules.hpp): Conv (valid, same, strided) and
// Conv1D (same, strided, dilated), alone and in chains, through the layer checker, which holds their jet
// and HVP rules to finite differences in double and to the float rules.
#include <catch2/catch.hpp>

#include "chainlet/chain.hpp"
#include "chainlet/layers/conv.hpp"
#include "chainlet/layers/conv1d.hpp"
#include "chainlet/layers/dense.hpp"
#include "chainlet/layers/flatten.hpp"
#include "support.hpp"

namespace test_conv_rules {

using namespace chainlet;

namespace {
void require_rules_pass(const LayerCheckResult& r) {
    INFO(r.report());
    REQUIRE(r.passed());
    REQUIRE(r.jet_rule_checked);
    REQUIRE(r.hvp_rule_checked);
}
}  // namespace

TEST_CASE("Conv's derivative rules: valid, same, strided, even kernels", "[conv][gradient]") {
    const auto o = test::odd_chunk_options();
    require_rules_pass(check_layer<Conv<3, 3, 4, Tanh>, Input<5, 6, 2>>(o));
    require_rules_pass(check_layer<Conv<3, 2, 3, Softplus, Padding::same>, Input<4, 5, 3>>(o));  // saves z
    require_rules_pass(check_layer<Conv<2, 2, 2, Identity, Padding::same>, Input<3, 4, 1>>(o));
    require_rules_pass(check_layer<Conv<3, 3, 5, Tanh, Padding::valid, 2>, Input<7, 6, 2>>(o));
}

TEST_CASE("Conv1D's derivative rules: same, strided, dilated", "[conv1d][gradient]") {
    const auto o = test::odd_chunk_options();
    require_rules_pass(check_layer<Conv1D<3, 4, Tanh, Padding::same>, Input<9, 2>>(o));
    require_rules_pass(check_layer<Conv1D<2, 3, GELU, Padding::valid, 2>, Input<10, 3>>(o));
    require_rules_pass(check_layer<Conv1D<3, 2, Tanh, Padding::same, 1, 2>, Input<8, 1>>(o));
}

// Chains: the input derivatives of a scalar field on an image or a sequence run through every layer's rule.
TEST_CASE("Convolutions in a chain: the derivative passes' rules against finite differences", "[conv][gradient]") {
    using Image = Chain<Input<6, 5, 1>, Conv<3, 3, 3, Tanh, Padding::same>, Conv<2, 2, 2, Softplus, Padding::valid, 2>,
                        Flatten, Dense<4, Tanh>, Dense<1>>;
    using Sequence = Chain<Input<9, 2>, Conv1D<3, 3, Tanh>, Conv1D<2, 2, Tanh, Padding::valid, 1, 2>, Flatten, Dense<1>>;
    require_rules_pass(check_bound_layer<Image::sequence>());
    require_rules_pass(check_bound_layer<Sequence::sequence>());
}

}  // namespace test_conv_rules
