// Parallel<Product, ...> of three branches: the input-derivative pass takes two.
#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"

using B = chainlet::Branch<chainlet::Dense<3, chainlet::Tanh>>;
using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Parallel<chainlet::Product, B, B, B>, chainlet::Dense<1>>;
int main() {
    chainlet::DerivativeWorkspace<Net, float> ws(chainlet::DerivativeSpec::gradient(2), 16, 1);
    return static_cast<int>(ws.chunk());
}
