// GRU<0> (no hidden units) on a sequence: one error naming H, not a second one from its output shape
// (Shape<0>) and none from the layers after it.
#include "chainlet/chainlet.hpp"

using Net = chainlet::Chain<chainlet::Input<5, 3>, chainlet::GRU<0>, chainlet::Dense<2>>;
int main() { return static_cast<int>(Net::num_params); }
