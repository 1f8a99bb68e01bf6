// A layer the parameter Hessian-vector product has no rule for (GRU inside a Parallel branch): one
// static_assert (jet.hpp), whose "required from" line names the layer.
#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/hvp.hpp"

using Net = chainlet::Chain<chainlet::Input<4, 2>,
                            chainlet::Parallel<chainlet::Sum, chainlet::Branch<chainlet::Flatten, chainlet::Dense<3, chainlet::Tanh>>,
                                               chainlet::Branch<chainlet::GRU<3>>>,
                            chainlet::Dense<1>>;
int main() {
    chainlet::HessianVectorWorkspace<Net, double> ws(16, 1);
    return static_cast<int>(ws.chunk);
}
