// Impossible compositions of the issue-13 layers are compile errors with a readable message. ctest builds
// this file once per case (COMPILE_ERROR_CASE = 1, 2, ...) and passes when the compiler prints the
// expected message (tests/CMakeLists.txt lists them); case 0 is valid and must compile, so the
// harness itself can fail.
#include "chainlet/chainlet.hpp"

using namespace chainlet;

#ifndef COMPILE_ERROR_CASE
#define COMPILE_ERROR_CASE 0
#endif

#if COMPILE_ERROR_CASE == 0  // every layer in a valid composition
using Net = Chain<Input<12, 3>, Conv1D<3, 4, Tanh, Padding::same, 1, 2>, Conv1D<3, 4, ReLU, Padding::valid, 2>, MaxPool1D<2>,
                  AvgPool1D<1>, GlobalAvgPool, Dense<2>>;
using Net2 = Chain<Input<9, 9, 1>, Conv<3, 3, 2, ReLU, Padding::valid, 2>, AvgPool<2>, GlobalAvgPool, Dense<2>>;
static_assert(Net::num_params > 0 && Net2::num_params > 0);
#elif COMPILE_ERROR_CASE == 1  // kernel longer than the unpadded sequence
using Net = Chain<Input<4, 2>, Conv1D<5, 4>>;
#elif COMPILE_ERROR_CASE == 2  // dilated kernel (span 7) longer than the unpadded sequence
using Net = Chain<Input<6, 2>, Conv1D<3, 4, Identity, Padding::valid, 1, 3>>;
#elif COMPILE_ERROR_CASE == 3  // a Conv1D on an image
using Net = Chain<Input<8, 8, 1>, Conv1D<3, 4>>;
#elif COMPILE_ERROR_CASE == 4  // same padding with a stride (PyTorch refuses it)
using Net = Chain<Input<8, 2>, Conv1D<3, 4, Identity, Padding::same, 2>>;
#elif COMPILE_ERROR_CASE == 5
using Net = Chain<Input<8, 8, 2>, Conv<3, 3, 4, Identity, Padding::same, 2>>;
#elif COMPILE_ERROR_CASE == 6  // a 2-D pool on a sequence
using Net = Chain<Input<10, 3>, AvgPool<2>>;
#elif COMPILE_ERROR_CASE == 7  // window longer than the sequence
using Net = Chain<Input<4, 2>, MaxPool1D<5>>;
#elif COMPILE_ERROR_CASE == 8  // nothing to pool over
using Net = Chain<Input<10>, GlobalAvgPool>;
#elif COMPILE_ERROR_CASE == 9  // strided kernel larger than the image
using Net = Chain<Input<4, 8, 1>, Conv<5, 5, 2, Identity, Padding::valid, 2>>;
#elif COMPILE_ERROR_CASE == 10  // a 1-D pool on an image
using Net = Chain<Input<8, 8, 1>, AvgPool1D<2>>;
#endif

#if COMPILE_ERROR_CASE != 0
static_assert(Net::in_size > 0);
#endif
