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

// Sin is applied after the product, not in its tiles (fuses_into_product): the layer's z must be the
// Identity layer's output bit for bit, and y Sin's value of it, on one sample, a few and a batch with a
// vector tail, with and without a bias, in a short (K <= 8) and a long reduction.
template <class T, class Fused, class Plain, std::size_t In>
void applied_after_the_product() {
    using LS = typename Fused::template bound<Shape<In>>;
    using LI = typename Plain::template bound<Shape<In>>;
    STATIC_REQUIRE(!fuses_into_product<Sin<3>>);
    STATIC_REQUIRE(LS::num_params == LI::num_params);
    STATIC_REQUIRE(LS::saved_per_sample == LS::out_size);  // z
    const auto p = test::random_vector<T>(LS::num_params, 5, 0.5);
    for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{2 * simd::width<T> + 5}, std::size_t{61}}) {
        const auto x = test::random_vector<T>(In * n, n + 1);
        std::vector<T> y(LS::out_size * n), z(LS::out_size * n), zi(LS::out_size * n);
        LS::forward(p.data(), x.data(), y.data(), z.data(), n);
        LI::forward(p.data(), x.data(), zi.data(), static_cast<T*>(nullptr), n);
        INFO("n = " << n);
        REQUIRE(z == zi);
        for (std::size_t j = 0; j < y.size(); ++j)
            REQUIRE(y[j] == Approx(Sin<3>::value(z[j])).epsilon(1e-6).margin(1e-7));
    }
}

TEMPLATE_TEST_CASE("Dense with Sin: z is the product's bits, y its sine (applied after the product)",
                   "[activation]", float, double) {
    applied_after_the_product<TestType, Dense<9, Sin<3>>, Dense<9, Identity>, 6>();
    applied_after_the_product<TestType, Dense<9, Sin<3>>, Dense<9, Identity>, 23>();
    applied_after_the_product<TestType, DenseNoBias<9, Sin<3>>, DenseNoBias<9, Identity>, 23>();
}

}  // namespace test_activations_fused
