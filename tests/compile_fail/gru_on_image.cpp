// Must not compile: a GRU reads a sequence Input<T, F>, not an image (ctest gru_on_image_is_an_error
// expects the static_assert's message).
#include "chainlet/chain.hpp"
#include "chainlet/layers/dense.hpp"
#include "chainlet/layers/gru.hpp"

using Net = chainlet::Chain<chainlet::Input<28, 28, 1>, chainlet::GRU<8>, chainlet::Dense<10>>;
static_assert(Net::num_params > 0);
