// fit with float parameters and double targets for SquaredError (which expects float targets): the targets'
// element type named in one error, not a pointer conversion deep in the workspace.
#include <vector>

#include "chainlet/chainlet.hpp"

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<3, chainlet::Tanh>, chainlet::Dense<1>>;
int main() {
    std::vector<float> p(Net::num_params), x(2 * 4);
    std::vector<double> y(4);
    chainlet::Adam<float> opt(1e-3f);
    chainlet::fit<Net>(p, chainlet::SquaredError{}, x, y, opt);
}
