// A layer the input-derivative pass has no rule for (GRU, inside a Residual): one static_assert
// (jet.hpp), whose "required from" line names the layer.
#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"

using Net = chainlet::Chain<chainlet::Input<4, 2>, chainlet::Residual<chainlet::GRU<2, true>>, chainlet::Flatten,
                            chainlet::Dense<1>>;
int main() {
    chainlet::DerivativeWorkspace<Net, double> ws(chainlet::DerivativeSpec::laplacian(8), 16, 1);
    return static_cast<int>(ws.chunk());
}
