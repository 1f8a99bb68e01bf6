// An activation without a jet (ELU: no Act::jet yet) fused into a Dense, and one as an ActivationLayer
// inside a Residual: the input-derivative pass names the missing jet in one static_assert per layer,
// not its "no rule for this layer" error (the layers are Dense and ActivationLayer, which it supports).
#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<4, chainlet::ELU>,
                            chainlet::Residual<chainlet::ActivationLayer<chainlet::SiLU>>, chainlet::Dense<1>>;
int main() {
    chainlet::DerivativeWorkspace<Net, double> ws(chainlet::DerivativeSpec::laplacian(2), 16, 1);
    return static_cast<int>(ws.chunk());
}
