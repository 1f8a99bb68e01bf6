// A Residual whose inner layers change the shape: the readable static_assert of residual.hpp.
#include "chainlet/chainlet.hpp"

using Net = chainlet::Chain<chainlet::Input<4>, chainlet::Residual<chainlet::Dense<5>>, chainlet::Dense<1>>;
int main() { return static_cast<int>(Net::num_params); }
