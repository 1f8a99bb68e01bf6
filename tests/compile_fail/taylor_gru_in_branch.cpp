// GRU inside a Parallel branch: the input-derivative pass has no rule for it, one static_assert
// (jet.hpp).
#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"

using Net = chainlet::Chain<chainlet::Input<4, 2>,
                            chainlet::Parallel<chainlet::Dot, chainlet::Branch<chainlet::Flatten, chainlet::Dense<3, chainlet::Tanh>>,
                                               chainlet::Branch<chainlet::GRU<3>>>>;
int main() {
    chainlet::DerivativeWorkspace<Net, float> ws(chainlet::DerivativeSpec::gradient(8), 16, 1);
    return static_cast<int>(ws.chunk());
}
