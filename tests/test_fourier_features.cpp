// FourierFeatures: the layer checker (finite differences in double, float against double, its jet and
// HVP rules) on odd sizes and chunks, fixed and trainable, in a chain too; values against the definition;
// B drawn at init from the layer's stream, fixed (out of the optimiser's reach) unless trainable; the
// checkpoint text and the safetensors tensor. Its PyTorch cross-check in the derivative passes is
// tests/pinn_crosscheck's cases "fourier" and "fourier_trainable".
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/architecture.hpp"
#include "chainlet/io/checkpoint.hpp"
#include "chainlet/io/safetensors.hpp"
#include "support.hpp"

namespace test_fourier_features {

using namespace chainlet;

TEST_CASE("FourierFeatures: the layer checker, its rules included, fixed and trainable", "[fourier_features][gradient]") {
    for (const auto& r : {check_layer<FourierFeatures<5>, Input<3>>(test::odd_chunk_options()),
                          check_layer<FourierFeatures<9, 3, 2>, Input<1>>(test::odd_chunk_options()),
                          check_layer<FourierFeatures<4, 1, 3>, Input<2, 2>>(test::odd_chunk_options()),
                          check_layer<TrainableFourierFeatures<5, 1, 2>, Input<3>>(test::odd_chunk_options()),
                          check_layer<TrainableFourierFeatures<3, 1, 3>, Input<2, 2>>(test::odd_chunk_options())}) {
        INFO(r.report());
        REQUIRE(r.passed());
        REQUIRE(r.jet_rule_checked);
        REQUIRE(r.hvp_rule_checked);
    }
    // sigma 1/2: at larger ones the chain's third derivatives, ~(2 pi sigma)^3, put the checker's central
    // differences (step 1e-5) above its tolerance
    const auto fixed = check_bound_layer<Chain<Input<2>, FourierFeatures<6, 1, 2>, Dense<7, Tanh>, Dense<1>>>();
    const auto trained = check_bound_layer<Chain<Input<2>, TrainableFourierFeatures<6, 1, 2>, Dense<7, Tanh>, Dense<1>>>();
    for (const auto& r : {fixed, trained}) {
        INFO(r.report());
        REQUIRE(r.passed());
        REQUIRE(r.jet_rule_checked);
        REQUIRE(r.hvp_rule_checked);
    }
}

TEST_CASE("FourierFeatures: values against the definition, B drawn at init, fixed unless trainable", "[fourier_features]") {
    constexpr std::size_t F = 3, M = 4, n = 5;
    using L = FourierFeatures<M, 5, 2>::bound<Shape<F>>;
    STATIC_REQUIRE(L::num_params == M * F);
    STATIC_REQUIRE(L::num_fixed_params == M * F);
    STATIC_REQUIRE(TrainableFourierFeatures<M, 5, 2>::bound<Shape<F>>::num_fixed_params == 0);
    std::vector<double> b(M * F);
    Rng draw(11), ref(11);
    L::init(std::span<double>(b), draw, InitKind::glorot_uniform);
    for (std::size_t i = 0; i < M * F; ++i) REQUIRE(b[i] == 2.5 * ref.normal());

    const auto x = test::random_vector(F * n, 3);
    std::vector<double> y(2 * M * n);
    L::forward(static_cast<const double*>(b.data()), x.data(), y.data(), static_cast<double*>(nullptr), n);
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t o = 0; o < M; ++o) {
            double z = 0;
            for (std::size_t j = 0; j < F; ++j) z += b[o * F + j] * x[j * n + s];
            z *= 2 * std::numbers::pi;
            REQUIRE(y[o * n + s] == Approx(std::sin(z)).margin(1e-14));
            REQUIRE(y[(M + o) * n + s] == Approx(std::cos(z)).margin(1e-14));
        }

    // In a chain: B is the first M F parameters, drawn from the seed, fixed; the text and the tensor.
    using Net = Chain<Input<F>, FourierFeatures<M, 5, 2>, Dense<2>>;
    STATIC_REQUIRE(Net::num_params == M * F + 2 * M * 2 + 2);
    REQUIRE(fixed_param_ranges<Net>() == std::vector<ParamRange>{{0, M * F}});
    REQUIRE(fixed_param_ranges<Chain<Input<F>, TrainableFourierFeatures<M>, Dense<2>>>().empty());
    std::vector<double> p1(Net::num_params), p2(Net::num_params), p3(Net::num_params);
    init_params<Net>(p1, 1);
    init_params<Net>(p2, 1);
    init_params<Net>(p3, 2);
    REQUIRE(p1 == p2);
    REQUIRE(p1[0] != p3[0]);
    REQUIRE(architecture<Net>::text() == "Input[3] FourierFeatures[4, sigma 5/2] Dense[2,identity]");
    REQUIRE(architecture<Chain<Input<F>, TrainableFourierFeatures<M, 5, 2>, Dense<2>>>::text() ==
            "Input[3] FourierFeatures[4, sigma 5/2, trainable] Dense[2,identity]");
    const auto tensors = architecture<Net>::torch_tensors();
    REQUIRE(tensors[0].name == "0.B");
    REQUIRE(tensors[0].shape == std::vector<std::uint64_t>{M, F});
    REQUIRE(tensors[0].source[F + 1] == F + 1);  // row-major, as in the buffer
    // B goes through both file formats with the other parameters
    std::vector<double> q(Net::num_params), r(Net::num_params);
    load_checkpoint_bytes<Net>(checkpoint_bytes<Net>(p3), "memory", q);
    REQUIRE(q == p3);
    import_safetensors_bytes<Net>(safetensors_bytes<Net>(p3), "memory", r);
    REQUIRE(r == p3);
}

}  // namespace test_fourier_features
