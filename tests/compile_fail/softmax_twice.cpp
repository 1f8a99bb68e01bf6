// fit with SoftmaxCrossEntropy on a chain that ends in Softmax: the loss applies the softmax itself, so
// training would apply it twice. One error that says so (value_and_gradient makes the same check,
// detail::training_types_ok).
#include <cstdint>
#include <vector>

#include "chainlet/chainlet.hpp"

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<3>, chainlet::Softmax>;
int main() {
    std::vector<float> p(Net::num_params), x(2 * 4);
    std::vector<std::int32_t> y(4);
    chainlet::Adam<float> opt(1e-3f);
    chainlet::fit<Net>(p, chainlet::SoftmaxCrossEntropy{}, x, y, opt);
}
