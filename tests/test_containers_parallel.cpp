// Parallel (every combination) and Slice: the layer checker (finite differences in double,
// accumulation, repeated pullback, float vs double), and the features a Slice selects.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "container_chains.hpp"
#include "support.hpp"

namespace test_containers_parallel {

using namespace chainlet;

namespace {

using test::require_layer_check;

using test::DeepONetSmall;
using test::Mixed;
using test::ResMlp;

}  // namespace

TEST_CASE("Parallel passes the layer checker with every combination", "[containers][gradient]") {
    require_layer_check<Parallel<Concat, Branch<Dense<3, Tanh>>, Branch<Dense<4>, Dense<2, Sigmoid>>>, Input<5>>();
    require_layer_check<Parallel<Sum, Branch<Dense<4, Tanh>>, Branch<Dense<4>>, Branch<Dense<3>, Dense<4, GELU>>>,
                        Input<5>>();
    require_layer_check<Parallel<Product, Branch<Dense<4, Tanh>>, Branch<Dense<4, Softplus>>, Branch<Dense<4>>>,
                        Input<3>>();
    require_layer_check<Parallel<Dot, Branch<Slice<0, 4>, Dense<6, Tanh>>, Branch<Slice<4, 2>, Dense<6>>>, Input<6>>();
    require_layer_check<Parallel<Concat, Branch<Dense<3>>>, Input<4>>();  // one branch: no dx to add up
    require_layer_check<Parallel<Sum, Branch<Conv<3, 3, 2, Tanh>>, Branch<Conv<3, 3, 2, Identity>>>, Input<6, 5, 1>>();
}

TEST_CASE("Slice passes the layer checker and selects its features", "[containers][gradient]") {
    require_layer_check<Slice<2, 3>, Input<7>>();
    require_layer_check<Slice<0, 7>, Input<7>>();
    using B = Slice<1, 2>::bound<Shape<4>>;
    const std::vector<double> x = {0, 1, 2, 3, 10, 11, 12, 13};  // 4 features x 2 samples, feature-major
    std::vector<double> y(4);
    B::forward(static_cast<const double*>(nullptr), x.data(), y.data(), static_cast<double*>(nullptr), 2);
    REQUIRE(y == std::vector<double>{2, 3, 10, 11});
}

}  // namespace test_containers_parallel
