// Containers: the layer checker (finite differences in double, accumulation, repeated pullback, float
// vs double) on Residual, nested. Parallel and Slice are in test_containers_parallel.cpp; whole
// container chains (the layer checker, threads, Jacobians, files, training) in test_container_chains.cpp; readable shape errors in tests/compile_fail; the PyTorch cross-check is
// torch_crosscheck.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "container_chains.hpp"
#include "support.hpp"

namespace test_containers {

using namespace chainlet;

namespace {

using test::require_layer_check;

using test::DeepONetSmall;
using test::Mixed;
using test::ResMlp;

}  // namespace

TEST_CASE("Residual passes the layer checker", "[containers][gradient]") {
    require_layer_check<Residual<Dense<6, Tanh>, Dense<6>>, Input<6>>();
    require_layer_check<Residual<Dense<9, GELU>, Dense<6, Softplus>>, Input<6>>();  // saved z inside
    require_layer_check<Residual<Dense<6, Sigmoid>>, Input<6>>();                   // one inner layer
    require_layer_check<Residual<Residual<Dense<5, Tanh>>, Dense<5>>, Input<5>>();  // nested
    require_layer_check<Residual<Conv<3, 3, 2, Tanh, Padding::same>>, Input<5, 4, 2>>();
}

}  // namespace test_containers
