// Must not compile: an LSTM reads a sequence Input<T, F>; a flat vector of 50 values is not one (write
// Input<50, 1> for 50 scalar steps).
#include "chainlet/chain.hpp"
#include "chainlet/layers/lstm.hpp"

using Net = chainlet::Chain<chainlet::Input<50>, chainlet::LSTM<8>>;
int main() { return static_cast<int>(Net::num_params); }
