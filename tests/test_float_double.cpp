// Float and double through the dense, pooling and flatten layers (the convolutions in
// test_float_double_conv.cpp): each layer's forward pass and pullback is run in both element
// types on the same inputs and must agree. The finite-difference gradient checks (double) live beside
// each piece (test_activations, test_dense, test_conv, test_maxpool, test_losses, test_chain,
// test_lenet5); optimisers, data kernels and training in both types are in test_float_double_training.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_float_double {

using namespace chainlet;

namespace {

// A layer type and the sample shape it is bound to.
template <class Layer, class InShape>
struct Case {
    using bound = typename Layer::template bound<InShape>;
};

template <class T, class U>
std::vector<T> cast(const std::vector<U>& v) {
    return std::vector<T>(v.begin(), v.end());
}

// Runs L's forward pass and pullback in T on inputs that are exact in float; returns y, dx and g. g
// starts non-zero as in training, but comparing float with double cannot tell a pullback that adds into
// g from one that overwrites it (both types would do the same); that needs g compared with a known
// value, as the "pullback accumulates into g" case of test_pullback.cpp does for a dense chain.
struct LayerRun {
    std::vector<double> y, dx, g;
};
template <class T, class L>
LayerRun run_layer(std::size_t n) {
    const auto p = cast<T>(cast<float>(test::random_vector(L::num_params, 1, 0.5)));
    const auto x = cast<T>(cast<float>(test::random_vector(L::in_size * n, 2)));
    auto dy = cast<T>(cast<float>(test::random_vector(L::out_size * n, 3)));
    auto g = cast<T>(cast<float>(test::random_vector(L::num_params, 4)));
    std::vector<T> y(L::out_size * n), dx(L::in_size * n), saved(L::saved_per_sample * n + 1),
        scratch(L::scratch_per_sample * n + 1);
    L::forward(p.data(), x.data(), y.data(), saved.data(), n);
    L::pullback(p.data(), g.data(), x.data(), y.data(), saved.data(), scratch.data(), dy.data(), dx.data(), n);
    return {std::vector<double>(y.begin(), y.end()), std::vector<double>(dx.begin(), dx.end()),
            std::vector<double>(g.begin(), g.end())};
}

}  // namespace

TEMPLATE_TEST_CASE("every layer: float and double forward passes and pullbacks agree", "[float][double][layer]",
                   (Case<Dense<9, Tanh>, Shape<7>>), (Case<Dense<33, GELU>, Shape<5>>),
                   (Case<DenseNoBias<6, Softplus>, Shape<11>>), (Case<DenseNoBias<4, Sigmoid>, Shape<3>>),
                   (Case<MaxPool<2, 2>, Shape<6, 7, 3>>), (Case<MaxPool<3>, Shape<9, 6, 2>>),
                   (Case<Flatten, Shape<3, 4, 2>>)) {
    using L = typename TestType::bound;  // one type for both: the element type is a template of its functions
    for (std::size_t n : {1, 5, 16, 37}) {  // the one-sample route, a tail-only chunk, full vectors, vectors + tail
        INFO("n=" << n);
        const auto f = run_layer<float, L>(n);
        const auto d = run_layer<double, L>(n);
        // float's relative precision is 6e-8; the sums here have at most ~100 terms.
        REQUIRE(test::max_rel_diff(f.y, d.y) < 2e-5);
        REQUIRE(test::max_rel_diff(f.dx, d.dx) < 2e-5);
        REQUIRE(test::max_rel_diff(f.g, d.g) < 2e-5);
    }
}

}  // namespace test_float_double
