// The kernel instances compiled once, into libchainlet, instead of in every program that uses them.
//
// nn_panel (kernels/gemm.hpp) is a template on its epilogue, its start, the element type and the
// addressing of its operands, and each instance brings some thirty register-tile functions with it. A
// program that uses a handful of layers instantiated them all anew, and that was most of its compile
// time. The instances the built-in layers use with the common activations are declared here as
// explicit instantiation declarations (`extern template`), and src/kernels/instances.cpp defines them.
// Any other instance (a user's own activation as an epilogue, say) is instantiated where it is used, as
// before; both give the same code.
//
// The lists are X-macros, so that the declarations and the definitions share the forms (the top-level
// CMakeLists.txt repeats the activations, one wrapper each):
// CHAINLET_FOR_EACH_INSTANCED_ACTIVATION(X) and CHAINLET_FOR_EACH_FEW_INPUTS_ACTIVATION(X) call X(Act) for
// the activations with instances (below), and the
// CHAINLET_*_INSTANCES(X, Act, T) lists call X(Epilogue, init, T, AOff, BOff, ARowStride, KRange) for one
// activation (or none) and element type.
//
// A program compiled with CHAINLET_IMPLICIT_KERNELS defined sees no declarations and instantiates every
// kernel it uses itself, so it needs no libchainlet for them (scripts/fuzz.sh compiles the library's
// sources into each fuzzer so).
//
// This header sits on the floor of the layers (it needs the activations, which the kernels do not
// know); every layer header that calls a kernel includes it.
#pragma once

#include <cstddef>

#include "chainlet/activations.hpp"
#include "chainlet/kernels/gemm.hpp"

// The activations with instances: the ones many of the project's programs use (tests, examples,
// benchmarks). An instance pays off only where two or more programs use it, and each is compiled whether
// used or not; the panels of Sigmoid, ELU, LeakyReLU, SiLU and GELUExact, most of which no program or
// one uses, compile where they are used, as a user's own activation does.
#define CHAINLET_FOR_EACH_INSTANCED_ACTIVATION(X, ...)                                                       \
    X(::chainlet::Identity, __VA_ARGS__)                                                                     \
    X(::chainlet::ReLU, __VA_ARGS__)                                                                         \
    X(::chainlet::Tanh, __VA_ARGS__)                                                                         \
    X(::chainlet::Softplus, __VA_ARGS__)                                                                     \
    X(::chainlet::GELU, __VA_ARGS__)

// The activations whose few-input forms (CHAINLET_FEW_INPUTS_INSTANCES) have instances: the first layers
// of small scientific networks (the tiny MLP, the PINN and neural-ODE networks) and linear outputs.
#define CHAINLET_FOR_EACH_FEW_INPUTS_ACTIVATION(X, ...)                                                      \
    X(::chainlet::Identity, __VA_ARGS__)                                                                     \
    X(::chainlet::Tanh, __VA_ARGS__)

// Linear products (no epilogue): input gradients (from zero, A's rows Out apart), weight gradients as
// outer products and recurrent steps (accumulating), a recurrent layer's input product (row bias), a
// convolution's one-sample weight gradient (A through a table of pixel offsets).
#define CHAINLET_LINEAR_INSTANCES(X, T)                                                                      \
    X(::chainlet::kernels::NoEpilogue, zero, T, Stride, Stride, ptrdiff_t, KRange)                      \
    X(::chainlet::kernels::NoEpilogue, accumulate, T, Stride, Stride, ptrdiff_t, KRange)                \
    X(::chainlet::kernels::NoEpilogue, accumulate, T, Stride, Stride, UnitStride, KRange)                    \
    X(::chainlet::kernels::NoEpilogue, row_bias, T, Stride, Stride, UnitStride, KRange)                      \
    X(::chainlet::kernels::NoEpilogue, accumulate, T, Table, Stride, UnitStride, KRange)

// With an activation: a Dense forward (with and without bias; one sample without bias reads A with a
// zero row stride), and a convolution's one-sample forward along the channels or along the pixels.
#define CHAINLET_ACTIVATION_INSTANCES(X, Act, T)                                                             \
    X(Act, row_bias, T, Stride, Stride, UnitStride, KRange)                                                  \
    X(Act, zero, T, Stride, Stride, UnitStride, KRange)                                                      \
    X(Act, zero, T, Stride, Stride, ptrdiff_t, KRange)                                                  \
    X(Act, col_bias, T, Table, Stride, ptrdiff_t, KRange)                                               \
    X(Act, row_bias, T, Stride, Table, UnitStride, KRange)

// A Dense forward of 1 to short_reduction inputs (gemm_nn_fixed_k).
#define CHAINLET_FEW_INPUTS_INSTANCES(X, Act, T)                                                             \
    X(Act, row_bias, T, Stride, Stride, UnitStride, FixedKRange<1>)                                          \
    X(Act, row_bias, T, Stride, Stride, UnitStride, FixedKRange<2>)                                          \
    X(Act, row_bias, T, Stride, Stride, UnitStride, FixedKRange<3>)                                          \
    X(Act, row_bias, T, Stride, Stride, UnitStride, FixedKRange<4>)                                          \
    X(Act, row_bias, T, Stride, Stride, UnitStride, FixedKRange<5>)                                          \
    X(Act, row_bias, T, Stride, Stride, UnitStride, FixedKRange<6>)                                          \
    X(Act, row_bias, T, Stride, Stride, UnitStride, FixedKRange<7>)                                          \
    X(Act, row_bias, T, Stride, Stride, UnitStride, FixedKRange<8>)

static_assert(::chainlet::kernels::short_reduction == 8, "CHAINLET_FEW_INPUTS_INSTANCES lists K = 1 .. 8");

// One nn_panel instance: `extern template` here, `template` in src/.
#define CHAINLET_NN_PANEL_INSTANCE(prefix, E, I, T, AOff, BOff, ARs, KR)                                       \
    prefix void ::chainlet::kernels::nn_panel<E, ::chainlet::kernels::Init::I, T, ::chainlet::kernels::AOff,  \
                                              ::chainlet::kernels::BOff, ::chainlet::kernels::ARs,             \
                                              ::chainlet::kernels::KR>(                                        \
        std::size_t, std::size_t,                                                                              \
        const ::chainlet::kernels::Tile<T, ::chainlet::kernels::AOff, ::chainlet::kernels::BOff,              \
                                        ::chainlet::kernels::ARs, ::chainlet::kernels::KR>&);

#if !defined(CHAINLET_DEFINING_KERNEL_INSTANCES) && !defined(CHAINLET_IMPLICIT_KERNELS)
#define CHAINLET_DECLARE_NN_PANEL(E, I, T, AOff, BOff, ARs, KR) CHAINLET_NN_PANEL_INSTANCE(extern template, E, I, T, AOff, BOff, ARs, KR)
#define CHAINLET_DECLARE_ACTIVATION(Act, T) CHAINLET_ACTIVATION_INSTANCES(CHAINLET_DECLARE_NN_PANEL, Act, T)
#define CHAINLET_DECLARE_FEW_INPUTS(Act, T) CHAINLET_FEW_INPUTS_INSTANCES(CHAINLET_DECLARE_NN_PANEL, Act, T)
CHAINLET_LINEAR_INSTANCES(CHAINLET_DECLARE_NN_PANEL, float)
CHAINLET_LINEAR_INSTANCES(CHAINLET_DECLARE_NN_PANEL, double)
CHAINLET_FOR_EACH_INSTANCED_ACTIVATION(CHAINLET_DECLARE_ACTIVATION, float)
CHAINLET_FOR_EACH_INSTANCED_ACTIVATION(CHAINLET_DECLARE_ACTIVATION, double)
CHAINLET_FOR_EACH_FEW_INPUTS_ACTIVATION(CHAINLET_DECLARE_FEW_INPUTS, float)
CHAINLET_FOR_EACH_FEW_INPUTS_ACTIVATION(CHAINLET_DECLARE_FEW_INPUTS, double)
#undef CHAINLET_DECLARE_FEW_INPUTS
#undef CHAINLET_DECLARE_ACTIVATION
#undef CHAINLET_DECLARE_NN_PANEL
#endif
