// Container chains shared by the container tests (test_containers*.cpp, test_container_chains.cpp): a
// residual MLP, a small DeepONet (Parallel<Dot> over two Slices) and a mix of Concat, Sum and Residual.
#pragma once

#include "chainlet/chainlet.hpp"

namespace test {

using ResMlp = chainlet::Chain<chainlet::Input<5>, chainlet::Dense<16, chainlet::Tanh>,
                               chainlet::Residual<chainlet::Dense<16, chainlet::Tanh>, chainlet::Dense<16, chainlet::GELU>>,
                               chainlet::Residual<chainlet::Dense<16, chainlet::Tanh>>, chainlet::Dense<2>>;
using DeepONetSmall =
    chainlet::Chain<chainlet::Input<9>,
                    chainlet::Parallel<chainlet::Dot,
                                       chainlet::Branch<chainlet::Slice<0, 7>, chainlet::Dense<12, chainlet::Tanh>, chainlet::Dense<5>>,
                                       chainlet::Branch<chainlet::Slice<7, 2>, chainlet::Dense<12, chainlet::Tanh>,
                                                        chainlet::Dense<5, chainlet::Tanh>>>,
                    chainlet::Dense<1>>;
using Mixed = chainlet::Chain<
    chainlet::Input<6>,
    chainlet::Parallel<chainlet::Concat, chainlet::Branch<chainlet::Dense<4, chainlet::Tanh>>,
                       chainlet::Branch<chainlet::Slice<2, 3>, chainlet::Dense<3, chainlet::Sigmoid>>>,
    chainlet::Residual<chainlet::Parallel<chainlet::Sum, chainlet::Branch<chainlet::Dense<7, chainlet::Tanh>>,
                                          chainlet::Branch<chainlet::Dense<7>>>>,
    chainlet::Dense<3>>;

}  // namespace test
