// ActivationLayer<Act> and Softmax: the layer checker (finite differences in double, float against
// double, the pullback rules) on flat inputs and images and on odd chunk sizes, values against the
// definition, and the metadata PyTorch needs. The activations fused into Dense and Conv are in
// test_activations_fused*.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/architecture.hpp"
#include "support.hpp"

namespace test_activation_layer {

using namespace chainlet;
using LeakyLayer = ActivationLayer<LeakyReLU<1, 5>>;  // aliases: a comma splits a Catch macro argument

TEMPLATE_TEST_CASE("ActivationLayer: the layer checker on a flat input and an image", "[activation_layer][gradient]",
                   ActivationLayer<Identity>, ActivationLayer<ReLU>, ActivationLayer<Tanh>, ActivationLayer<Sigmoid>,
                   ActivationLayer<Softplus>, ActivationLayer<GELU>, ActivationLayer<ELU>, LeakyLayer,
                   ActivationLayer<SiLU>, ActivationLayer<GELUExact>) {
    const auto flat = check_layer<TestType, Input<7>>(test::odd_chunk_options());
    INFO(flat.report());
    REQUIRE(flat.passed());
    const auto image = check_layer<TestType, Input<3, 2, 5>>(test::odd_chunk_options());
    INFO(image.report());
    REQUIRE(image.passed());
}

TEST_CASE("ActivationLayer: values are the activation's, element by element", "[activation_layer]") {
    using B = ActivationLayer<ELU>::bound<Shape<5, 3>>;
    const std::size_t n = 9;
    const auto x = test::random_vector(B::in_size * n, 4, 2.0);
    std::vector<double> y(x.size());
    B::forward<double>(nullptr, x.data(), y.data(), nullptr, n);
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(y[i] == Approx(x[i] > 0 ? x[i] : std::expm1(x[i])).epsilon(1e-14));
}

// With its derivative rules, alone and in a chain (the input derivatives through it, a residual loss's
// parameter gradient, the parameter H v).
TEST_CASE("Softmax: the layer checker, and outputs that are probabilities", "[softmax][gradient]") {
    using Net = Chain<Input<3>, Dense<5, Tanh>, Softmax, Dense<4, Softplus>, Softmax, Dense<1>>;
    for (const auto& r : {check_layer<Softmax, Input<2>>(test::odd_chunk_options()), check_layer<Softmax, Input<11>>(test::odd_chunk_options()),
                          check_bound_layer<Net::sequence>()}) {
        INFO(r.report());
        REQUIRE(r.passed());
        REQUIRE(r.jet_rule_checked);
        REQUIRE(r.hvp_rule_checked);
    }
    using B = Softmax::bound<Shape<6>>;
    const std::size_t n = 19;
    auto x = test::random_vector(B::in_size * n, 5, 3.0);
    x[0] = 800;  // no overflow: the maximum is subtracted first
    std::vector<double> y(x.size());
    B::forward<double>(nullptr, x.data(), y.data(), nullptr, n);
    for (std::size_t s = 0; s < n; ++s) {
        double sum = 0, mx = -1e300;
        for (std::size_t k = 0; k < 6; ++k) mx = std::max(mx, x[k * n + s]);
        for (std::size_t k = 0; k < 6; ++k) sum += std::exp(x[k * n + s] - mx);
        for (std::size_t k = 0; k < 6; ++k) REQUIRE(y[k * n + s] == Approx(std::exp(x[k * n + s] - mx) / sum).epsilon(1e-14));
    }
    REQUIRE(y[0] == Approx(1.0));
}

TEST_CASE("Softmax after training with SoftmaxCrossEntropy: the prediction chain shares the parameters", "[softmax]") {
    using Train = Chain<Input<4>, Dense<8, Tanh>, Dense<3>>;
    using Predict = Chain<Input<4>, Dense<8, Tanh>, Dense<3>, Softmax>;
    static_assert(Train::num_params == Predict::num_params);
    std::vector<float> p(Train::num_params);
    init_params<Train>(p, 3);
    const auto x = test::random_vector<float>(4 * 10, 6);
    std::vector<float> logits(30), prob(30);
    predict<Train>(p, x, logits);
    predict<Predict>(p, x, prob);
    for (std::size_t s = 0; s < 10; ++s) {
        float sum = 0;
        for (std::size_t k = 0; k < 3; ++k) sum += std::exp(logits[s * 3 + k]);
        for (std::size_t k = 0; k < 3; ++k) REQUIRE(prob[s * 3 + k] == Approx(std::exp(logits[s * 3 + k]) / sum).epsilon(1e-5));
    }
    // Training Predict with SoftmaxCrossEntropy is a compile error (detail::softmax_twice).
    STATIC_REQUIRE(detail::softmax_twice<Predict, SoftmaxCrossEntropy>);
    STATIC_REQUIRE(!detail::softmax_twice<Train, SoftmaxCrossEntropy>);
    STATIC_REQUIRE(!detail::softmax_twice<Predict, SquaredError>);
}

TEST_CASE("ActivationLayer, Softmax: metadata (one PyTorch module each, no tensors, feature order kept)", "[activation_layer]") {
    using Net = Chain<Input<4, 3, 2>, Conv<3, 3, 2>, ActivationLayer<GELUExact>, Flatten, ActivationLayer<LeakyReLU<>>,
                      Dense<3>, Softmax>;
    REQUIRE(architecture<Net>::text() ==
            "Input[4,3,2] Conv[3x3,2,identity,valid] Activation[gelu_erf] Flatten Activation[leaky_relu(1/100)] "
            "Dense[3,identity] Softmax");
    const auto t = architecture<Net>::torch_tensors();
    REQUIRE(t.size() == 4);
    REQUIRE(t[0].name == "0.weight");
    REQUIRE(t[2].name == "4.weight");  // Conv 0, GELU 1, Flatten 2, LeakyReLU 3, Linear 4, Softmax 5
    // The Linear after Flatten and an elementwise layer still reads the image in PyTorch's (C, H, W) order.
    using D = Net::layer<4>;
    REQUIRE(t[2].source[1] == Net::param_offset[4] + 2 * D::out_size);  // PyTorch feature 1 = (c0, y0, x1) = chainlet feature 2
}

}  // namespace test_activation_layer
