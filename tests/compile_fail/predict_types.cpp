// predict with double parameters into float outputs: the element types named in one error.
#include <vector>

#include "chainlet/chainlet.hpp"

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<3, chainlet::Tanh>, chainlet::Dense<1>>;
int main() {
    std::vector<double> p(Net::num_params), x(2 * 4);
    std::vector<float> out(4);
    chainlet::predict<Net>(p, x, out);
}
