// Whole container chains: the layer checker, and in use: the same bits on 1 and 2 threads, input Jacobians through containers,
// checkpoints and safetensors of container chains, and a residual MLP that trains.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/checkpoint.hpp"
#include "chainlet/io/safetensors.hpp"
#include "container_chains.hpp"
#include "support.hpp"

namespace test_container_chains {

using namespace chainlet;

namespace {

using test::DeepONetSmall;
using test::Mixed;
using test::ResMlp;

}  // namespace

TEST_CASE("whole container chains pass the layer checker", "[containers][gradient]") {
    LayerCheckOptions o;
    o.chunk_sizes = {1, 5};
    for (const auto& r : {check_bound_layer<ResMlp>(o), check_bound_layer<DeepONetSmall>(o), check_bound_layer<Mixed>(o)}) {
        INFO(r.report());
        REQUIRE(r.passed());
    }
}

TEST_CASE("containers: value_and_gradient gives the same bits on 1 and 2 threads", "[containers][threads]") {
    const std::size_t n = 3000;  // many chunks
    std::vector<float> p(Mixed::num_params), g1(p.size()), g2(p.size());
    init_params<Mixed>(p, 3);
    const auto x = test::random_vector<float>(n * Mixed::in_size, 4);
    const auto y = test::random_vector<float>(n * Mixed::out_size, 5);
    const float l1 = value_and_gradient<Mixed>(p, g1, x, y, SquaredError{}, 1);
    const float l2 = value_and_gradient<Mixed>(p, g2, x, y, SquaredError{}, 2);
    REQUIRE(l1 == l2);
    REQUIRE(g1 == g2);
}

TEST_CASE("containers: the input Jacobian matches finite differences of predict", "[containers][pullback]") {
    std::vector<double> p(DeepONetSmall::num_params);
    init_params<DeepONetSmall>(p, 7);
    for (auto& v : p) v += 0.1;  // non-zero biases
    auto x = test::random_vector(DeepONetSmall::in_size, 8);
    PullbackWorkspace<DeepONetSmall, double> ws(1);
    std::vector<double> J(DeepONetSmall::out_size * DeepONetSmall::in_size);
    jacobian(ws, p, x, J);
    std::vector<double> out(1);
    for (std::size_t j = 0; j < x.size(); ++j) {
        const double keep = x[j], h = 1e-6;
        x[j] = keep + h;
        predict<DeepONetSmall>(p, x, out);
        const double up = out[0];
        x[j] = keep - h;
        predict<DeepONetSmall>(p, x, out);
        x[j] = keep;
        REQUIRE(J[j] == Approx((up - out[0]) / (2 * h)).epsilon(1e-6).margin(1e-9));
    }
}

TEST_CASE("container chains round-trip through checkpoints and safetensors", "[containers][io]") {
    std::vector<double> p(Mixed::num_params), q(Mixed::num_params, 0.0), r(Mixed::num_params, 0.0);
    init_params<Mixed>(p, 9);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.01 * static_cast<double>(i % 7);
    REQUIRE(architecture<Mixed>::text() ==
            "Input[6] Parallel[concat]{Dense[4,tanh] | Slice[2,3] Dense[3,sigmoid]} "
            "Residual{Parallel[sum]{Dense[7,tanh] | Dense[7,identity]}} Dense[3,identity]");
    const auto ckpt = checkpoint_bytes<Mixed>(p);
    load_checkpoint_bytes<Mixed>(ckpt, "memory", q);
    REQUIRE(q == p);
    // A checkpoint of another architecture with the same parameter count is refused.
    using Other = Chain<Input<6>, Parallel<Concat, Branch<Dense<4, Tanh>>, Branch<Slice<2, 3>, Dense<3, Tanh>>>,
                        Residual<Parallel<Sum, Branch<Dense<7, Tanh>>, Branch<Dense<7>>>>, Dense<3>>;
    STATIC_REQUIRE(Other::num_params == Mixed::num_params);
    std::vector<double> o(Other::num_params);
    REQUIRE_THROWS(load_checkpoint_bytes<Other>(ckpt, "memory", o));
    const auto st = safetensors_bytes<Mixed>(p);
    import_safetensors_bytes<Mixed>(st, "memory", r);
    REQUIRE(r == p);
    std::vector<std::string> names;
    for (const auto& t : architecture<Mixed>::torch_tensors()) names.push_back(t.name);
    REQUIRE(names == std::vector<std::string>{"0.branches.0.0.weight", "0.branches.0.0.bias", "0.branches.1.1.weight",
                                              "0.branches.1.1.bias", "1.f.0.branches.0.0.weight",
                                              "1.f.0.branches.0.0.bias", "1.f.0.branches.1.0.weight",
                                              "1.f.0.branches.1.0.bias", "2.weight", "2.bias"});
}

TEST_CASE("a Residual right after a Flatten of an image has no PyTorch layout and says so", "[containers][io]") {
    using Net = Chain<Input<4, 4, 2>, Flatten, Residual<Dense<32, Tanh>>, Dense<2>>;
    REQUIRE_THROWS_WITH(architecture<Net>::torch_tensors(), Catch::Contains("Flatten of an image"));
}

TEST_CASE("a residual MLP trains with fit", "[containers][fit]") {
    const std::size_t n = 512;
    std::vector<float> p(ResMlp::num_params);
    init_params<ResMlp>(p, 11);
    std::vector<float> x(n * 5), y(n * 2);
    Rng rng(12);
    for (std::size_t s = 0; s < n; ++s) {
        for (std::size_t f = 0; f < 5; ++f) x[s * 5 + f] = static_cast<float>(2 * rng.uniform() - 1);
        y[s * 2] = std::sin(3 * x[s * 5]) * x[s * 5 + 1];
        y[s * 2 + 1] = x[s * 5 + 2] * x[s * 5 + 3] - x[s * 5 + 4];
    }
    std::vector<float> g(p.size());
    const float before = value_and_gradient<ResMlp>(p, g, x, y, SquaredError{});
    Adam opt(3e-3f);
    FitOptions o;
    o.epochs = 300;
    o.batch = 128;
    fit<ResMlp>(p, SquaredError{}, x, y, opt, o);
    const float after = value_and_gradient<ResMlp>(p, g, x, y, SquaredError{});
    INFO("loss before " << before << ", after " << after);
    REQUIRE(after < 0.05f * before);
}

}  // namespace test_container_chains
