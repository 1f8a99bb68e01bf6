// Every public entry point rejects wrong runtime sizes (and other bad arguments) with an exception of
// the documented type whose message says what was expected and what was given.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/idx.hpp"
#include "support.hpp"

namespace test_errors {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
using Net = Chain<Input<3>, Dense<5, Tanh>, Dense<2>>;  // 3*5+5 + 5*2+2 = 32 parameters
static_assert(Net::num_params == 32);

namespace {

// The call throws E, and its message contains every piece (the numbers expected and given).
template <class E = std::invalid_argument, class F>
void require_error(F&& call, std::initializer_list<std::string> pieces) {
    std::string message;
    try {
        call();
    } catch (const E& e) {
        message = e.what();
    }
    INFO("message: " << message);
    REQUIRE(!message.empty());  // empty: nothing (or another type) was thrown
    for (const auto& piece : pieces) {
        INFO("expected to contain: " << piece);
        CHECK(message.find(piece) != std::string::npos);
    }
}

struct Fixture {
    std::size_t n = 4;
    std::vector<float> p = std::vector<float>(Net::num_params), g = std::vector<float>(Net::num_params);
    std::vector<float> x = test::random_vector<float>(3 * 4, 1), y = test::random_vector<float>(2 * 4, 2);
    std::vector<std::int32_t> labels = {0, 1, 1, 0};
    std::vector<float> out = std::vector<float>(2 * 4);
    Workspace<Net, float> ws;
};

}  // namespace

TEST_CASE("errors: init_params checks the parameter buffer", "[errors]") {
    std::vector<float> p(31);
    require_error([&] { init_params<Net>(p, 1); }, {"init_params", "31 elements", "expected 32"});
    std::vector<double> big(33);
    require_error([&] { init_params<Net>(big, 1); }, {"33 elements", "expected 32"});
}

TEST_CASE("errors: value_and_gradient checks parameters, gradient, inputs, targets, labels, threads", "[errors]") {
    Fixture f;
    init_params<Net>(f.p, 1);
    std::vector<float> p_short(30), g_long(40), x_ragged(13), y_short(7);
    auto vg = [&](const auto& p, auto& g, const auto& x, const auto& y) {
        return value_and_gradient<Net>(f.ws, p, g, x, y, SquaredError{});
    };
    REQUIRE_NOTHROW(vg(f.p, f.g, f.x, f.y));
    require_error([&] { vg(p_short, f.g, f.x, f.y); }, {"value_and_gradient", "parameter buffer has 30", "expected 32"});
    require_error([&] { vg(f.p, g_long, f.x, f.y); }, {"gradient buffer has 40", "expected 32"});
    require_error([&] { vg(f.p, f.g, x_ragged, f.y); }, {"input has 13 values", "positive multiple of 3"});
    require_error([&] { vg(f.p, f.g, std::vector<float>{}, f.y); }, {"input has 0 values", "multiple of 3"});
    require_error([&] { vg(f.p, f.g, f.x, y_short); }, {"target buffer has 7", "expected 8"});
    // Cross-entropy: one label per sample, each in [0, out).
    auto ce = [&](const std::vector<std::int32_t>& labels) {
        return value_and_gradient<Net>(f.ws, f.p, f.g, f.x, labels, SoftmaxCrossEntropy{});
    };
    REQUIRE_NOTHROW(ce(f.labels));
    require_error([&] { ce({0, 1, 1}); }, {"target buffer has 3", "expected 4"});
    require_error([&] { ce({0, 1, 2, 0}); }, {"label 2 of sample 2", "[0, 2)"});
    require_error([&] { ce({0, -1, 1, 0}); }, {"label -1 of sample 1", "[0, 2)"});
    require_error([&] { value_and_gradient<Net>(f.ws, f.p, f.g, f.x, f.y, SquaredError{}, -2); },
                  {"value_and_gradient", "threads is -2", "expected 0"});
    // The convenience overload (thread's own workspace) checks the same way.
    require_error([&] { value_and_gradient<Net>(f.p, f.g, x_ragged, f.y, SquaredError{}); }, {"input has 13 values"});
}

TEST_CASE("errors: predict checks parameters, inputs, outputs, threads", "[errors]") {
    Fixture f;
    std::vector<float> p_short(1), out_short(7), x_ragged(11);
    REQUIRE_NOTHROW(predict<Net>(f.ws, f.p, f.x, f.out));
    require_error([&] { predict<Net>(f.ws, p_short, f.x, f.out); }, {"predict", "parameter buffer has 1 ", "expected 32"});
    require_error([&] { predict<Net>(f.ws, f.p, x_ragged, f.out); }, {"predict", "input has 11 values", "multiple of 3"});
    require_error([&] { predict<Net>(f.ws, f.p, f.x, out_short); }, {"output buffer has 7", "expected 8"});
    require_error([&] { predict<Net>(f.p, f.x, f.out, -1); }, {"threads is -1"});
}

TEST_CASE("errors: ByteData inputs are checked like any other", "[errors]") {
    Fixture f;
    std::vector<std::uint8_t> bytes(3 * 4 + 1);
    require_error([&] { predict<Net>(f.ws, f.p, ByteData{bytes, 1.0, 0.0}, f.out); }, {"input has 13 values"});
    bytes.resize(3 * 5);
    require_error([&] { predict<Net>(f.ws, f.p, ByteData{bytes, 1.0, 0.0}, f.out); }, {"output buffer has 8", "expected 10"});
    require_error([&] { value_and_gradient<Net>(f.ws, f.p, f.g, ByteData{bytes}, f.y, SquaredError{}); },
                  {"target buffer has 8", "expected 10"});
}

TEST_CASE("errors: fit checks parameters, inputs, targets, labels, threads before any step", "[errors]") {
    Fixture f;
    init_params<Net>(f.p, 1);
    const auto p0 = f.p;
    Adam opt(1e-2f);
    std::size_t steps = 0;
    FitOptions o;
    o.on_step = [&](const StepInfo&) { ++steps; };
    std::vector<float> p_short(31), x_ragged(10), y_long(9);
    require_error([&] { fit<Net>(p_short, SquaredError{}, f.x, f.y, opt, o); }, {"fit", "parameter buffer has 31", "expected 32"});
    require_error([&] { fit<Net>(f.p, SquaredError{}, x_ragged, f.y, opt, o); }, {"fit", "input has 10 values", "multiple of 3"});
    require_error([&] { fit<Net>(f.p, SquaredError{}, f.x, y_long, opt, o); }, {"fit", "target buffer has 9", "expected 8"});
    const std::vector<std::int32_t> bad_labels = {0, 1, 5, 0};
    require_error([&] { fit<Net>(f.p, SoftmaxCrossEntropy{}, f.x, bad_labels, opt, o); }, {"label 5 of sample 2", "[0, 2)"});
    o.threads = -3;
    require_error([&] { fit<Net>(f.p, SquaredError{}, f.x, f.y, opt, o); }, {"fit", "threads is -3"});
    REQUIRE(steps == 0);
    REQUIRE(f.p == p0);
}

TEST_CASE("errors: optimisers check their settings and buffer sizes", "[errors][optim]") {
    require_error([] { Adam<float>(-1.0f); }, {"lr > 0", "got lr -1"});
    require_error([] { AdamW<double>(1e-3, 0.01, 1.5); }, {"beta1, beta2 < 1", "beta1 1.5", "eps 1e-08"});
    require_error([] { SGD<float>(0.1f, 1.5f); }, {"momentum < 1", "momentum 1.5"});
    require_error([] { SGD<float>(0.0f); }, {"lr > 0", "got lr 0"});
    std::vector<float> p(5), g(4), p6(6), g6(6);
    Adam adam(1e-3f);
    require_error([&] { adam.step(p, g); }, {"Adam::step", "5 parameters but 4 gradients"});
    adam.init(5);
    require_error([&] { adam.step(p6, g6); }, {"Adam::step", "initialised for 5 parameters, given 6"});
    SGD sgd(0.1f);
    require_error([&] { sgd.step(p, g); }, {"SGD::step", "5 parameters but 4 gradients"});
    sgd.init(5);
    require_error([&] { sgd.step(p6, g6); }, {"SGD::step", "initialised for 5 parameters, given 6"});
}

TEST_CASE("errors: the IDX reader reports a file that claims more data than it holds, without allocating it", "[errors][idx]") {
    // Header of a 65535 x 65535 x 255 array (about 2^40 bytes) followed by 3 data bytes.
    const std::vector<std::uint8_t> bytes = {0, 0, 8, 3, 0, 0, 0xff, 0xff, 0, 0, 0xff, 0xff, 0, 0, 0, 0xff, 1, 2, 3};
    require_error<IdxError>([&] { parse_idx(bytes, "big.idx"); },
                            {"big.idx: truncated", "needs 1095183237375 bytes", "only 3"});
    require_error<IdxError>([&] { parse_idx(bytes, "big.idx", 2); }, {"big.idx", "has 3 dimensions, expected 2"});
}

}  // namespace test_errors
