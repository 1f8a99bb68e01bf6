// predict with float parameters and outputs but double inputs: the inputs' element type named in one
// error, not a pointer conversion after it.
#include <vector>

#include "chainlet/chainlet.hpp"

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<3, chainlet::Tanh>, chainlet::Dense<1>>;
int main() {
    std::vector<float> p(Net::num_params), out(4);
    std::vector<double> x(2 * 4);
    chainlet::predict<Net>(p, x, out);
}
