// Conv1D (stride 1 through Conv's kernels, stride and dilation through the loop nest of
// kernels/conv_strided.hpp): the layer checker (finite differences in double, the contract's rules, float
// against double) on odd sizes with stride 1, and the architecture text. The layer checks with stride and
// dilation and the forward pass against the definition are in test_conv1d_strided.cpp, the strided Conv
// in test_conv_strided.cpp, training with both in test_conv1d_training.cpp.
#include <catch2/catch.hpp>

#include <string>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_conv1d {

using namespace chainlet;

namespace {

// The layer checker on L bound to InShape on chunks of 1, 3 and 17 samples; tol is looser for ReLU, whose
// kink a finite difference may cross. The derivative passes' rules are test_conv_rules.cpp's.
template <class L, class InShape>
void require_layer_check(double tol = 1e-6) {
    test::require_layer_check<L, Input<InShape::dims[0], InShape::dims[1]>, RuleChecks::off>(
        test::chunk_options({1, 3, 17}, tol));
}

}  // namespace

TEST_CASE("Conv1D: layer check, stride 1 (Conv's kernels), valid and same", "[conv1d][gradient]") {
    require_layer_check<Conv1D<3, 4, Tanh>, Shape<11, 3>>();
    require_layer_check<Conv1D<5, 7, Identity, Padding::same>, Shape<9, 2>>();
    require_layer_check<Conv1D<4, 3, Softplus, Padding::same>, Shape<7, 5>>();  // even kernel: one more at the end
    require_layer_check<Conv1D<2, 5, ReLU>, Shape<6, 1>>(1e-5);
}

TEST_CASE("Conv1D: architecture text names stride and dilation only when not 1", "[conv1d]") {
    REQUIRE(Conv1D<3, 4, Tanh>::bound<Shape<11, 3>>::describe() == "Conv1D[3,4,tanh,valid]");
    REQUIRE(Conv1D<3, 4, ReLU, Padding::same, 1, 2>::bound<Shape<11, 3>>::describe() ==
            "Conv1D[3,4,relu,same,dilation=2]");
    REQUIRE(Conv1D<3, 4, Identity, Padding::valid, 2>::bound<Shape<11, 3>>::describe() ==
            "Conv1D[3,4,identity,valid,stride=2]");
    // The stride-1 Conv keeps its text (checkpoints depend on it); a strided one adds the stride.
    REQUIRE(Conv<3, 3, 4, ReLU>::bound<Shape<8, 8, 1>>::describe() == "Conv[3x3,4,relu,valid]");
    REQUIRE(Conv<3, 3, 4, ReLU, Padding::valid, 2>::bound<Shape<8, 8, 1>>::describe() ==
            "Conv[3x3,4,relu,valid,stride=2]");
}

}  // namespace test_conv1d
