// FourierFeatures: the layer checker (finite differences in double, float against double, its jet and
// HVP rules) on odd sizes and chunks, in a chain too; values against the definition; B fixed by the
// template arguments and not among the parameters; the checkpoint text. Its PyTorch cross-check in the
// derivative passes is tests/pinn_crosscheck's case "fourier".
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/architecture.hpp"
#include "support.hpp"

namespace test_fourier_features {

using namespace chainlet;

TEST_CASE("FourierFeatures: the layer checker, its rules included", "[fourier_features][gradient]") {
    for (const auto& r : {check_layer<FourierFeatures<5>, Input<3>>(test::odd_chunk_options()),
                          check_layer<FourierFeatures<9, 3, 2, 7>, Input<1>>(test::odd_chunk_options()),
                          check_layer<FourierFeatures<4, 1, 3>, Input<2, 2>>(test::odd_chunk_options())}) {
        INFO(r.report());
        REQUIRE(r.passed());
        REQUIRE(r.jet_rule_checked);
        REQUIRE(r.hvp_rule_checked);
    }
    // sigma 1/2: at larger ones the chain's third derivatives, ~(2 pi sigma)^3, put the checker's central
    // differences (step 1e-5) above its tolerance
    using Net = Chain<Input<2>, FourierFeatures<6, 1, 2>, Dense<7, Tanh>, Dense<1>>;
    const auto r = check_bound_layer<Net::sequence>();
    INFO(r.report());
    REQUIRE(r.passed());
    REQUIRE(r.jet_rule_checked);
    REQUIRE(r.hvp_rule_checked);
}

TEST_CASE("FourierFeatures: values against the definition, B from Rng(Seed), fixed, not a parameter",
          "[fourier_features]") {
    constexpr std::size_t F = 3, M = 4, n = 5;
    using L = FourierFeatures<M, 5, 2, 11>::bound<Shape<F>>;
    const auto& b = L::frequencies<double>();
    Rng rng(11);
    for (std::size_t i = 0; i < M * F; ++i) REQUIRE(b[i] == 2.5 * rng.normal());
    const auto& bf = L::frequencies<float>();
    for (std::size_t i = 0; i < M * F; ++i) REQUIRE(bf[i] == static_cast<float>(b[i]));
    // another seed, other frequencies; the same arguments, the same array
    REQUIRE(FourierFeatures<M, 5, 2, 12>::bound<Shape<F>>::frequencies<double>()[0] != b[0]);
    REQUIRE(&L::frequencies<double>() == &b);

    const auto x = test::random_vector(F * n, 3);
    std::vector<double> y(2 * M * n);
    L::forward(static_cast<const double*>(nullptr), x.data(), y.data(), static_cast<double*>(nullptr), n);
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t o = 0; o < M; ++o) {
            double z = 0;
            for (std::size_t j = 0; j < F; ++j) z += b[o * F + j] * x[j * n + s];
            z *= 2 * std::numbers::pi;
            REQUIRE(y[o * n + s] == Approx(std::sin(z)).margin(1e-14));
            REQUIRE(y[(M + o) * n + s] == Approx(std::cos(z)).margin(1e-14));
        }

    using Net = Chain<Input<F>, FourierFeatures<M>, Dense<2>>;
    STATIC_REQUIRE(Net::num_params == 2 * M * 2 + 2);  // Dense's only
    STATIC_REQUIRE(Net::out_size == 2);
    REQUIRE(architecture<Chain<Input<F>, FourierFeatures<M, 5, 2, 11>, Dense<2>>>::text() ==
            "Input[3] FourierFeatures[4, sigma 5/2, seed 11] Dense[2,identity]");
}

}  // namespace test_fourier_features
