// Float and double through the convolutions: each layer's forward pass and pullback is run in both
// element types on the same inputs and must agree.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_float_double_conv {

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

TEMPLATE_TEST_CASE("every convolution: float and double forward passes and pullbacks agree", "[float][double][layer]",
                   (Case<Conv<3, 3, 4, ReLU>, Shape<7, 6, 2>>), (Case<Conv<2, 3, 5, Tanh>, Shape<5, 8, 3>>),
                   (Case<Conv<3, 3, 3, Identity, Padding::same>, Shape<6, 5, 2>>),
                   (Case<Conv<4, 2, 2, Softplus, Padding::same>, Shape<5, 6, 1>>),
                   (Case<Conv<3, 3, 16, Tanh>, Shape<6, 7, 3>>)) {  // the last: the weight gradient along the channels
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

}  // namespace test_float_double_conv
