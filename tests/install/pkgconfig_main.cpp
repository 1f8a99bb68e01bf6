// Built by tests/install/consumer_test.cmake with only `c++ -std=c++20 this.cpp $(pkg-config --cflags
// --libs chainlet)`: one float SGD step on a tiny chain must lower the loss, and the compiled library
// must link (build_report).
#include <chainlet/chainlet.hpp>

#include <cstdio>
#include <vector>

using Net = chainlet::Chain<chainlet::Input<3>, chainlet::Dense<8, chainlet::ReLU>, chainlet::Dense<2>>;

int main() {
    const std::vector<float> x = {0.1f, -0.4f, 0.8f, 1.0f, 0.3f, -0.2f, -0.7f, 0.5f, 0.0f};
    const std::vector<float> y = {1.0f, 0.0f, 0.0f, 1.0f, 0.5f, 0.5f};
    std::vector<float> p(Net::num_params), g(Net::num_params);
    chainlet::init_params<Net>(p, 3);
    const float before = chainlet::value_and_gradient<Net>(p, g, x, y, chainlet::SquaredError{});
    chainlet::SGD<float> opt(0.05f);
    for (int i = 0; i < 20; ++i) {
        chainlet::value_and_gradient<Net>(p, g, x, y, chainlet::SquaredError{});
        opt.step(p, g);
    }
    const float after = chainlet::value_and_gradient<Net>(p, g, x, y, chainlet::SquaredError{});
    std::printf("pkgconfig: %s\npkgconfig: before=%.6g after=%.6g\n", chainlet::build_report().c_str(), before, after);
    return after < before ? 0 : 1;
}
