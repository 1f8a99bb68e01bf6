// A type that is no layer at all (no bound<InShape>): one error.
#include "chainlet/chainlet.hpp"

struct NotALayer {};

using Net = chainlet::Chain<chainlet::Input<4>, NotALayer, chainlet::Dense<1>>;
int main() { return static_cast<int>(Net::num_params); }
