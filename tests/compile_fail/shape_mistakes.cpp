// Must not compile: a layer that cannot take the shape that reaches it, or whose template arguments are
// out of range; or a chain without an Input, with an extent 0 or without layers. ctest compiles this file once per case (-DSHAPE_CASE=n, "compile_fail: shape_<name>" in
// tests/CMakeLists.txt) and expects the layer's own message as the only error, with g++ and clang,
// whatever follows the layer in the chain and whatever the program then does with the network: the chain
// puts stand-ins in the place of the layer and every later one (rejects_shape, chainlet/layer.hpp).
#include "precompiled.hpp"

using namespace chainlet;

// Cases marked MLP also go through the input-derivative pass and the Hessian-vector product, which take
// Dense, ActivationLayer, Slice, Residual and Parallel only.
#if SHAPE_CASE == 1  // LeNet5 on a flat input
using Net = Chain<Input<784>, Conv<5, 5, 6, ReLU>, MaxPool<2>, Conv<5, 5, 16, ReLU>, MaxPool<2>, Flatten, Dense<10>>;
#elif SHAPE_CASE == 2
using Net = Chain<Input<8, 8, 1>, Conv<0, 3, 4>, Flatten, Dense<3>>;
#elif SHAPE_CASE == 3
using Net = Chain<Input<4, 4, 1>, Conv<5, 5, 6>, MaxPool<2>, Flatten, Dense<10>>;
#elif SHAPE_CASE == 4  // strided
using Net = Chain<Input<4, 8, 1>, Conv<5, 5, 2, Identity, Padding::valid, 2>, Flatten, Dense<2>>;
#elif SHAPE_CASE == 5  // PyTorch refuses padding="same" with a stride
using Net = Chain<Input<8, 8, 2>, Conv<3, 3, 4, Identity, Padding::same, 2>, Flatten, Dense<2>>;
#elif SHAPE_CASE == 6  // no Flatten after a convolution
using Net = Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2>, Dense<10, Tanh>, Dense<3>>;
#elif SHAPE_CASE == 7
#define MLP
using Net = Chain<Input<4, 4, 1>, Dense<10, Tanh>, Dense<3>>;
#elif SHAPE_CASE == 8
#define MLP
using Net = Chain<Input<4>, Dense<0>, Dense<3>>;
#elif SHAPE_CASE == 9
using Net = Chain<Input<784>, MaxPool<2>, Dense<10>>;
#elif SHAPE_CASE == 10
using Net = Chain<Input<4, 4, 1>, MaxPool<0>, Flatten, Dense<10>>;
#elif SHAPE_CASE == 11
using Net = Chain<Input<4, 4, 1>, MaxPool<5>, Flatten, Dense<10>>;
#elif SHAPE_CASE == 12  // a 2-D pool on a sequence
using Net = Chain<Input<10, 3>, AvgPool<2>, Flatten, Dense<2>>;
#elif SHAPE_CASE == 13
using Net = Chain<Input<4, 4, 1>, AvgPool<3, 5>, Flatten, Dense<10>>;
#elif SHAPE_CASE == 14
using Net = Chain<Input<4, 2>, MaxPool1D<5>, Flatten, Dense<2>>;
#elif SHAPE_CASE == 15  // a 1-D pool on an image
using Net = Chain<Input<8, 8, 1>, AvgPool1D<2>, Flatten, Dense<2>>;
#elif SHAPE_CASE == 16
using Net = Chain<Input<8>, MaxPool1D<2>, Flatten, Dense<1>>;
#elif SHAPE_CASE == 17
using Net = Chain<Input<4, 2>, Conv1D<5, 4>, Flatten, Dense<2>>;
#elif SHAPE_CASE == 18  // dilated kernel (span 7) longer than the sequence
using Net = Chain<Input<6, 2>, Conv1D<3, 4, Identity, Padding::valid, 1, 3>, Flatten, Dense<2>>;
#elif SHAPE_CASE == 19
using Net = Chain<Input<8, 8, 1>, Conv1D<3, 4>, Flatten, Dense<2>>;
#elif SHAPE_CASE == 20
using Net = Chain<Input<8, 2>, Conv1D<3, 4, Identity, Padding::same, 2>, Flatten, Dense<2>>;
#elif SHAPE_CASE == 21  // nothing to pool over
using Net = Chain<Input<10>, GlobalAvgPool, Dense<2>>;
#elif SHAPE_CASE == 22
using Net = Chain<Input<4, 4, 1>, LayerNorm, Flatten, Dense<1>>;
#elif SHAPE_CASE == 23
using Net = Chain<Input<1>, LayerNorm, Dense<1>>;
#elif SHAPE_CASE == 24
using Net = Chain<Input<4, 4, 1>, RMSNorm, Flatten, Dense<1>>;
#elif SHAPE_CASE == 25
using Net = Chain<Input<4, 4, 1>, Softmax, Flatten, Dense<1>>;
#elif SHAPE_CASE == 26
#define MLP
using Net = Chain<Input<4, 4, 1>, Slice<0, 3>, Dense<1>>;
#elif SHAPE_CASE == 27
#define MLP
using Net = Chain<Input<4>, Dense<4, Tanh>, Slice<2, 3>, Dense<1>>;
#elif SHAPE_CASE == 28
using Net = Chain<Input<8>, Dropout<100, 100>, Dense<1>>;
#elif SHAPE_CASE == 29  // a mistake inside a Residual: its own shape rule says nothing more
#define MLP
using Net = Chain<Input<4>, Dense<4, Tanh>, Residual<Dense<4, Tanh>, Slice<3, 2>>, Dense<1>>;
#elif SHAPE_CASE == 30
using Net = Chain<Input<4, 4, 1>, Parallel<Concat, Branch<Conv<3, 3, 2>>, Branch<Flatten>>, Dense<1>>;
#elif SHAPE_CASE == 31
#define MLP
using Net = Chain<Input<4>, Parallel<Sum, Branch<Dense<3, Tanh>>, Branch<Dense<2>>>, Dense<1>>;
#elif SHAPE_CASE == 32
#define MLP
using Net = Chain<Input<4>, Parallel<Dot, Branch<Dense<3>>>, Dense<1>>;
#elif SHAPE_CASE == 33  // a mistake inside a branch: Parallel's own shape rule says nothing more
#define MLP
using Net = Chain<Input<4>, Parallel<Sum, Branch<Dense<3, Tanh>>, Branch<Dense<4>, Dense<0>>>, Dense<1>>;
#elif SHAPE_CASE == 34  // the combination left out
#define MLP
using Net = Chain<Input<4>, Parallel<Branch<Dense<3>>, Branch<Dense<3>>>, Dense<1>>;
#elif SHAPE_CASE == 35  // two mistakes: the first is reported, and the layers after it are not checked
using Net = Chain<Input<784>, Conv<5, 5, 6>, MaxPool<2>, Dense<10>, LayerNorm>;
// The chain's own mistakes (detail::chain_binds): the chain is then one stand-in.
#elif SHAPE_CASE == 36
#define MLP
using Net = Chain<Dense<4, Tanh>, Dense<1>>;
#elif SHAPE_CASE == 37
using Net = Chain<Input<28, 0, 1>, Conv<5, 5, 6>, Flatten, Dense<10>>;
#elif SHAPE_CASE == 38
#define MLP
using Net = Chain<Input<4>>;
// Two mistakes in one layer: its first check speaks, the others hold when it fails.
#elif SHAPE_CASE == 39
using Net = Chain<Input<8, 8, 1>, Conv<0, 3, 2, Identity, Padding::same, 2>, Flatten, Dense<1>>;
#elif SHAPE_CASE == 40
#define MLP
using Net = Chain<Input<4>, Slice<10, 0>, Dense<1>>;
#elif SHAPE_CASE == 41
using Net = Chain<Input<1, 1, 1>, LayerNorm, Dense<1>>;
#elif SHAPE_CASE == 42
using Net = Chain<Input<4, 4, 1>, GRU<0>, Dense<1>>;
// Empty containers: their own message, nothing from the empty chain inside.
#elif SHAPE_CASE == 43
#define MLP
using Net = Chain<Input<4>, Residual<>, Dense<1>>;
#elif SHAPE_CASE == 44
#define MLP
using Net = Chain<Input<4>, Parallel<Sum>, Dense<1>>;
#elif SHAPE_CASE == 45
#define MLP
using Net = Chain<Input<4>, Parallel<Concat, Branch<Dense<3>>, Branch<>>, Dense<1>>;
#elif SHAPE_CASE == 46
#define MLP
using Net = Chain<Input<4>, Parallel<Branch<Dense<3>>>, Dense<1>>;
#endif

int main() {
    std::vector<double> p(Net::num_params), g(Net::num_params), x(Net::in_size * 4), y(Net::out_size * 4);
    Adam<double> opt(1e-3);
    fit<Net>(p, SquaredError{}, x, y, opt);
    const double loss = value_and_gradient<Net>(p, g, x, y, SquaredError{});
    predict<Net>(p, x, y);
    save_checkpoint<Net>("never_written.ckpt", p, opt);
#ifdef MLP
    DerivativeWorkspace<Net, double> derivatives(DerivativeSpec::laplacian(Net::in_size), 16, 1);
    HessianVectorWorkspace<Net, double> hvp(16, 1);
    return static_cast<int>(loss) + static_cast<int>(derivatives.chunk() + hvp.chunk);
#else
    return static_cast<int>(loss);
#endif
}
