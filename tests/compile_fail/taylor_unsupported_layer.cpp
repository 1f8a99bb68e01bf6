// A layer the input-derivative pass has no rule for (Softmax, inside a Residual): one static_assert
// (jet.hpp), whose "required from" line names the layer.
#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<4, chainlet::Tanh>,
                            chainlet::Residual<chainlet::Softmax, chainlet::Dense<4, chainlet::Tanh>>,
                            chainlet::Dense<1>>;
int main() {
    chainlet::DerivativeWorkspace<Net, double> ws(chainlet::DerivativeSpec::laplacian(2), 16, 1);
    return static_cast<int>(ws.chunk());
}
