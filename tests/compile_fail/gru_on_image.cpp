// Must not compile: a GRU reads a sequence Input<T, F>, not an image (ctest "compile_fail: gru_on_image"
// expects the static_assert's message as the only error).
#include "chainlet/chain.hpp"
#include "chainlet/layers/dense.hpp"
#include "chainlet/layers/gru.hpp"

using Net = chainlet::Chain<chainlet::Input<28, 28, 1>, chainlet::GRU<8>, chainlet::Dense<10>>;
int main() { return static_cast<int>(Net::num_params); }
