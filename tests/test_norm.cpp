// LayerNorm and RMSNorm: the layer checker (finite differences in double, float against double, the
// pullback rules; the derivative rules) on odd sizes and chunks, values against the definition, and the PyTorch metadata.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/architecture.hpp"
#include "support.hpp"

namespace test_norm {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

// Both with their derivative rules, alone and in a chain (the input derivatives through it, a residual
// loss's parameter gradient, the parameter H v).
TEST_CASE("LayerNorm: the layer checker", "[layer_norm][gradient]") {
    using Net = Chain<Input<3>, Dense<6, Tanh>, LayerNorm, Dense<4, Softplus>, LayerNorm, Dense<1>>;
    for (const auto& r : {check_layer<LayerNorm, Input<2>>(test::odd_chunk_options()), check_layer<LayerNorm, Input<7>>(test::odd_chunk_options()),
                          check_layer<LayerNorm, Input<33>>(test::odd_chunk_options()), check_bound_layer<Net::sequence>()}) {
        INFO(r.report());
        REQUIRE(r.passed());
        REQUIRE(r.jet_rule_checked);
        REQUIRE(r.hvp_rule_checked);
    }
}

TEST_CASE("RMSNorm: the layer checker", "[rms_norm][gradient]") {
    using Net = Chain<Input<3>, Dense<6, Tanh>, RMSNorm, Dense<4, Softplus>, RMSNorm, Dense<1>>;
    for (const auto& r : {check_layer<RMSNorm, Input<3>>(test::odd_chunk_options()), check_layer<RMSNorm, Input<7>>(test::odd_chunk_options()),
                          check_layer<RMSNorm, Input<33>>(test::odd_chunk_options()), check_bound_layer<Net::sequence>()}) {
        INFO(r.report());
        REQUIRE(r.passed());
        REQUIRE(r.jet_rule_checked);
        REQUIRE(r.hvp_rule_checked);
    }
}

TEST_CASE("LayerNorm and RMSNorm: values against the definition, init is weight 1 and bias 0", "[layer_norm][rms_norm]") {
    constexpr std::size_t F = 5, n = 6;
    const auto x = test::random_vector(F * n, 8, 3.0), p = test::random_vector(2 * F, 9);
    std::vector<double> y(F * n), saved(2 * n);
    LayerNorm::bound<Shape<F>>::forward(p.data(), x.data(), y.data(), saved.data(), n);
    std::vector<double> yr(F * n), savedr(n);
    RMSNorm::bound<Shape<F>>::forward(p.data(), x.data(), yr.data(), savedr.data(), n);
    for (std::size_t s = 0; s < n; ++s) {
        double mu = 0, var = 0, ms = 0;
        for (std::size_t f = 0; f < F; ++f) mu += x[f * n + s] / F, ms += x[f * n + s] * x[f * n + s] / F;
        for (std::size_t f = 0; f < F; ++f) var += (x[f * n + s] - mu) * (x[f * n + s] - mu) / F;
        for (std::size_t f = 0; f < F; ++f) {
            REQUIRE(y[f * n + s] == Approx((x[f * n + s] - mu) / std::sqrt(var + 1e-5) * p[f] + p[F + f]).epsilon(1e-13));
            REQUIRE(yr[f * n + s] == Approx(x[f * n + s] / std::sqrt(ms + 1e-5) * p[f]).epsilon(1e-13));
        }
    }
    std::vector<float> q(LayerNorm::bound<Shape<F>>::num_params);
    Rng rng(1);
    LayerNorm::bound<Shape<F>>::init<float>(q, rng, InitKind::glorot_uniform);
    for (std::size_t f = 0; f < F; ++f) REQUIRE((q[f] == 1.0f && q[F + f] == 0.0f));
}

TEST_CASE("LayerNorm and RMSNorm: PyTorch names, and weights follow PyTorch's feature order after Flatten", "[layer_norm][rms_norm]") {
    using Net = Chain<Input<2, 2, 3>, Flatten, LayerNorm, RMSNorm, Dense<2>>;
    REQUIRE(architecture<Net>::text() == "Input[2,2,3] Flatten LayerNorm RMSNorm Dense[2,identity]");
    const auto t = architecture<Net>::torch_tensors();
    REQUIRE(t.size() == 5);
    REQUIRE(t[0].name == "1.weight");
    REQUIRE(t[1].name == "1.bias");
    REQUIRE(t[2].name == "2.weight");
    REQUIRE(t[3].name == "3.weight");
    // PyTorch's feature 1 of a flattened (C, H, W) = (3, 2, 2) image is (c0, y0, x1): chainlet's (y0, x1, c0) = 3.
    REQUIRE(t[0].source[1] == Net::param_offset[1] + 3);
    REQUIRE(t[1].source[1] == Net::param_offset[1] + 12 + 3);
    REQUIRE(t[2].source[1] == Net::param_offset[2] + 3);
}

}  // namespace test_norm
