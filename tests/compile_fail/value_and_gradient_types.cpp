// value_and_gradient with double parameters and a float gradient: the element types named in one error,
// not a pointer conversion deep in the workspace.
#include <vector>

#include "chainlet/chainlet.hpp"

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<3, chainlet::Tanh>, chainlet::Dense<1>>;
int main() {
    std::vector<double> p(Net::num_params);
    std::vector<float> g(Net::num_params), x(2 * 4), y(4);
    return chainlet::value_and_gradient<Net>(p, g, x, y, chainlet::SquaredError{}) > 0;
}
