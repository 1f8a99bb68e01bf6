// An activation without a jet (LeakyReLU: no Act::jet yet) fused into a Dense, and GELUExact as an
// ActivationLayer: the parameter Hessian-vector product names the missing jet in one static_assert per
// layer, not its "no rule for this layer" error.
#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/hvp.hpp"

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<3, chainlet::LeakyReLU<1, 10>>,
                            chainlet::ActivationLayer<chainlet::GELUExact>, chainlet::Dense<1>>;
int main() {
    chainlet::HessianVectorWorkspace<Net, double> ws(16, 1);
    return static_cast<int>(ws.chunk);
}
