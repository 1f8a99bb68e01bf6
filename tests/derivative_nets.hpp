// The networks and helpers shared by the derivative-pass tests (test_input_derivatives.cpp,
// test_derivative_passes.cpp, test_hvp.cpp): MLPs of 1-3 inputs, chains with every container, the plain
// forward value of one sample, and a residual loss that uses every derivative column.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"

namespace test::derivative_nets {

using namespace chainlet;

// The network's first output at one sample, by the plain forward pass.
template <class Net, class T>
T net_value(const std::vector<T>& p, std::vector<T> x, std::size_t output = 0) {
    std::vector<T> saved(Net::saved_per_sample + 1), y(Net::out_size);
    Net::forward(p.data(), x.data(), y.data(), saved.data(), 1);
    return y[output];
}

using Mlp2 = Chain<Input<2>, Dense<8, Tanh>, Dense<6, GELU>, Dense<1>>;
using Mlp3 = Chain<Input<3>, Dense<5, Softplus>, Dense<7, Sigmoid>, DenseNoBias<4, Tanh>, Dense<2, Identity>>;
using Mlp1 = Chain<Input<1>, Dense<9, GELU>, Dense<1, Tanh>>;
// The other activations: ELU, SiLU, exact GELU, LeakyReLU (ELU's f'' and LeakyReLU's f' jump at 0).
using MlpOther = Chain<Input<2>, Dense<6, ELU>, Dense<5, SiLU>, DenseNoBias<4, GELUExact>, Dense<3, LeakyReLU<1, 5>>,
                       Dense<1>>;
// Containers: a residual block; a DeepONet (Dot of a branch net on x_0 and a trunk net on x_1, x_2, the
// trunk with a residual block inside); a Product and a Sum of branches with Slice and ActivationLayer;
// a Concat after a residual block on the input (its input cotangent is not wanted).
using ResNet = Chain<Input<3>, Dense<8, Tanh>, Residual<Dense<8, Tanh>>, Dense<1>>;
using DeepONet = Chain<Input<3>, Parallel<Dot, Branch<Slice<0, 1>, Dense<6, Tanh>, Dense<5>>,
                                          Branch<Slice<1, 2>, Dense<6, GELU>, Residual<Dense<6, Tanh>>, Dense<5, Tanh>>>>;
using ProductNet = Chain<Input<2>, Parallel<Product, Branch<Dense<4, Tanh>>, Branch<Slice<1, 1>, Dense<4, Sigmoid>>>,
                         Dense<1>>;
using SumNet = Chain<Input<2>, Parallel<Sum, Branch<Dense<5, Tanh>, ActivationLayer<Softplus>>,
                                        Branch<Slice<0, 2>, Dense<5, GELU>>, Branch<Dense<5>>>,
                     Residual<Dense<5, Tanh>, Dense<5>>, Dense<2>>;
// Products of three and four factors (partial products saved, pulled back one factor at a time).
using Product3Net = Chain<Input<3>, Parallel<Product, Branch<Slice<0, 1>, Dense<4, Tanh>>, Branch<Slice<1, 1>, Dense<4, Sigmoid>>,
                                             Branch<Slice<2, 1>, Dense<4, GELU>>>,
                          Dense<1>>;
using Dot4Net = Chain<Input<2>, Parallel<Dot, Branch<Dense<5, Tanh>>, Branch<Slice<1, 1>, Dense<5, Tanh>>,
                                         Branch<Dense<5, Softplus>>, Branch<Slice<0, 1>, Dense<5>>>>;
using ConcatNet = Chain<Input<2>, Residual<Dense<2, Tanh>>,
                        Parallel<Concat, Branch<Dense<4, Tanh>>, Branch<Slice<1, 1>, Dense<3, Sigmoid>>, Branch<Slice<0, 2>>>,
                        ActivationLayer<Tanh>, Dense<1>>;


// A residual using every column: loss = mean (u + sum_i b_i u_i + sum_k c_k u_kk - source)^2 per output 0.
template <class Net>
auto test_residual() {
    std::vector<double> b(Net::in_size), c(Net::in_size + 1);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.3 + 0.2 * static_cast<double>(i);
    for (std::size_t k = 0; k < c.size(); ++k) c[k] = -0.5 + 0.4 * static_cast<double>(k);
    return linear_residual<double>(b, c, [](const double* x, std::size_t) { return std::sin(x[0]); }, 0.7);
}

template <class Net>
DerivativeSpec full_spec() {
    constexpr std::size_t F = Net::in_size;
    std::vector<std::size_t> all(F);
    for (std::size_t i = 0; i < F; ++i) all[i] = i;
    DerivativeSpec spec = DerivativeSpec::diagonal(F, all);
    spec.second.push_back(all);
    return spec;
}

}  // namespace test::derivative_nets
