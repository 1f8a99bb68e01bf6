// Writes the cases of the PyTorch autograd cross-check (tests/torch_crosscheck.py, ctest
// torch_crosscheck): for each model, in float64, random parameters, inputs and targets, and chainlet's
// squared-error loss, its parameter gradient (value_and_gradient) and input gradient (forward + pullback),
// as one safetensors file per case: the parameters under PyTorch's names, "grad.<name>" for the gradient
// in the same layout, and "input", "target", "loss", "dx". The script rebuilds each model in PyTorch,
// loads the parameters and compares.
//
//   torch_crosscheck_<part> <dir>
//
// The cases are split between two programs built from this file (CHAINLET_TORCH_PART 1: dense,
// containers, norms and recurrent; 2: convolutional), which keeps each one's compile time and memory small.
#include <cstdio>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/safetensors.hpp"
#include "user_layer.hpp"

#ifndef CHAINLET_TORCH_PART
#error "define CHAINLET_TORCH_PART as 1 or 2 (tests/CMakeLists.txt)"
#endif

using namespace chainlet;

namespace {

// Layers of 1-4 inputs over a chunk of 64 samples or more: the one-pass pullback (gemm_nt_activation),
// without an input gradient in value_and_gradient's first layer and with one everywhere else.
using FewInputsBatch = Chain<Input<3>, Dense<9, Tanh>, Dense<4, Softplus>, Dense<5, Tanh>, DenseNoBias<2>>;
// Layers of more than 4 inputs and outputs over a chunk of 64 samples or more: dz, db and the first 4
// inputs' weight gradient in one pass (Dense's pullback), with bias and without, dz from y and from z.
using WideBatch = Chain<Input<7>, Dense<9, Tanh>, Dense<6, GELU>, DenseNoBias<5, Tanh>, Dense<2>>;
using ResidualMlp = Chain<Input<5>, Dense<8, Tanh>, Residual<Dense<8, Tanh>, Dense<8, GELU>>, Residual<Dense<8, Softplus>>,
                         Dense<3>>;
using DeepONet = Chain<Input<12>,
                       Parallel<Dot, Branch<Slice<0, 10>, Dense<16, Tanh>, Dense<6>>,
                                Branch<Slice<10, 2>, Dense<16, Tanh>, Dense<6, Tanh>>>,
                       Dense<1>>;
using ParallelMix = Chain<Input<6>, Parallel<Concat, Branch<Dense<4, Tanh>>, Branch<Slice<1, 3>, Dense<2, Sigmoid>>>,
                          Parallel<Sum, Branch<Dense<5, Tanh>>, Branch<Dense<5>>, Branch<Residual<Dense<6, ReLU>>, Dense<5>>>,
                          Parallel<Product, Branch<Dense<3, Tanh>>, Branch<Dense<3, Softplus>>, Branch<DenseNoBias<3>>>>;
using UserLayerNet = Chain<Input<4>, ScaleShift, Dense<6, Tanh>, ScaleShift, Dense<2>>;
using ConvResidual = Chain<Input<6, 5, 2>, Conv<3, 3, 4, Tanh, Padding::same>,
                           Residual<Conv<3, 3, 4, Tanh, Padding::same>, Conv<3, 3, 4, Identity, Padding::same>>, MaxPool<2>,
                           Flatten, Dense<3>>;
// One input channel: on one sample the first convolution runs its vectors along the pixels of a row.
using GrayConv = Chain<Input<9, 10, 1>, Conv<3, 3, 5, Tanh>, Conv<2, 2, 3, Softplus, Padding::same>, Flatten, Dense<2>>;
// Channels a multiple of 4 (and more than 4): with 32 vector registers a chunk's weight gradient reads dz
// copied into blocks of 4 channels (kernels::conv_dz_blocks), from the output (tanh) and from z (softplus).
using ChannelBlocksConv = Chain<Input<7, 8, 3>, Conv<3, 3, 8, Tanh>, Conv<2, 2, 12, Softplus, Padding::same>, Flatten,
                                Dense<2>>;
// A convolution followed by a max pooling: with 16 doubles per chunk (two AVX-512 vectors) the first
// convolution's parameter gradients run in bands, each band's cotangent produced by the pooling's
// cotangent_rows (chain.hpp, pulls_back_next); 23 rows leave two out of the 3 x 2 windows.
using ConvPoolBands = Chain<Input<27, 28, 1>, Conv<5, 5, 6, Softplus>, MaxPool<3, 2>, Flatten, Dense<3>>;

// --- issue 13, 1-D convolutions, strided convolution, average pooling (layers13b) ---
// A sequence Input<L, C> is (L, C) per sample here and (C, L) in PyTorch (the script transposes it).
using Conv1dNet = Chain<Input<13, 3>, Conv1D<3, 4, Tanh>, Conv1D<2, 5, Softplus, Padding::same>, MaxPool1D<2>,
                        Conv1D<3, 4, Identity, Padding::valid, 2>, Flatten, Dense<3>>;
using Conv1dDilatedGap = Chain<Input<16, 2>, Conv1D<3, 6, Sigmoid, Padding::same, 1, 2>,
                               Conv1D<2, 4, Tanh, Padding::valid, 1, 3>, AvgPool1D<3>, Conv1D<2, 3, ReLU, Padding::valid, 2>,
                               GlobalAvgPool, Dense<2>>;
using StridedConvPool = Chain<Input<13, 11, 2>, Conv<3, 3, 4, Tanh, Padding::valid, 2>, AvgPool<2>,
                              Conv<2, 2, 5, Softplus>, GlobalAvgPool, Dense<3>>;
using StridedConvFlatten = Chain<Input<9, 8, 3>, Conv<2, 3, 4, GELU, Padding::valid, 3>, AvgPool<1, 2>, Flatten, Dense<2>>;
// --- end issue 13 (layers13b) ---
// --- recurrent layers (GRU, LSTM): a sequence Input<T, F> is PyTorch's batch_first (batch, T, F) ---
using GruLast = Chain<Input<6, 3>, GRU<5>, Dense<2>>;
using LstmSequence = Chain<Input<6, 3>, LSTM<4, true>, Flatten, Dense<2>>;
using GruSequenceLstm = Chain<Input<5, 2>, GRU<4, true>, LSTM<3>, Dense<1>>;
using LstmGruSequence = Chain<Input<4, 3>, LSTM<5, true>, GRU<3, true>, Flatten, Dense<2, Tanh>>;
// --- end of the recurrent layers ---

constexpr std::size_t default_samples = 7;

std::vector<double> normal(std::size_t n, Rng& rng, double scale) {
    std::vector<double> v(n);
    for (auto& e : v) e = scale * rng.normal();
    return v;
}

template <class Net>
std::vector<std::uint64_t> sample_shape(std::size_t n, std::size_t features) {
    std::vector<std::uint64_t> s{n};
    if (features != Net::in_size) return {n, features};
    for (auto d : detail::shape_dims<typename Net::in_shape>::get()) s.push_back(d);
    return s;
}

// One case's file: the parameters and gradient g under PyTorch's names, the input, target, loss, input
// gradient dx, and the flat gradients from the pullback (g2) and from value_and_gradient (g); extra holds
// further tensors of a case (name, shape, values).
struct ExtraTensor {
    std::string name;
    std::vector<std::uint64_t> shape;
    std::vector<double> values;
};
template <class Net>
void save_case(const std::string& dir, const std::string& name, const std::vector<double>& p, const std::vector<double>& x,
               const std::vector<double>& t, double loss, const std::vector<double>& g, const std::vector<double>& g2,
               const std::vector<double>& dx, std::vector<ExtraTensor> extra = {}) {
    const auto layout = architecture<Net>::torch_tensors();
    std::vector<std::vector<double>> values;
    std::vector<SafeTensor> tensors;
    auto add = [&](const std::string& tname, std::vector<std::uint64_t> shape, std::vector<double> v) {
        values.push_back(std::move(v));
        tensors.push_back({tname, "F64", std::move(shape), std::as_bytes(std::span<const double>(values.back()))});
    };
    values.reserve(2 * layout.size() + 8 + extra.size());  // the spans point into values
    for (const auto& lt : layout) {
        std::vector<double> pv(lt.source.size()), gv(lt.source.size());
        for (std::size_t k = 0; k < pv.size(); ++k) pv[k] = p[lt.source[k]], gv[k] = g[lt.source[k]];
        add(lt.name, lt.shape, pv);
        add("grad." + lt.name, lt.shape, gv);
    }
    for (auto& e : extra) add(e.name, std::move(e.shape), std::move(e.values));
    const std::size_t n = x.size() / Net::in_size;
    add("input", sample_shape<Net>(n, Net::in_size), x);
    add("target", {n, Net::out_size}, t);
    add("loss", {1}, {loss});
    add("dx", sample_shape<Net>(n, Net::in_size), dx);
    add("grad_from_pullback", {Net::num_params}, g2);
    add("grad_flat", {Net::num_params}, g);
    write_safetensors(dir + "/" + name + ".safetensors", tensors, {{"chainlet.architecture", architecture<Net>::text()}});
    std::printf("wrote %s: %s\n", name.c_str(), architecture<Net>::text().c_str());
}

template <class Net>
void write_case(const std::string& dir, const std::string& name, std::uint64_t seed,
                std::size_t samples = default_samples) {
    Rng rng(seed);
    const auto p = normal(Net::num_params, rng, 0.5);
    const auto x = normal(samples * Net::in_size, rng, 1.0);
    const auto t = normal(samples * Net::out_size, rng, 1.0);
    std::vector<double> g(Net::num_params);
    const double loss = value_and_gradient<Net>(p, g, x, t, SquaredError{});
    // dx: the pullback of dL/dy = 2 (y - t) / n (chainlet's squared error: mean over samples of the sum
    // over outputs).
    PullbackWorkspace<Net, double> ws(samples);
    std::vector<double> y(samples * Net::out_size), dy(y.size()), dx(x.size()), g2(Net::num_params, 0.0);
    forward(ws, p, x, y);
    for (std::size_t i = 0; i < y.size(); ++i) dy[i] = 2 * (y[i] - t[i]) / samples;
    pullback(ws, p, dy, dx, g2);

    save_case<Net>(dir, name, p, x, t, loss, g, g2, dx);
}

// ---- issue 13: standalone activations, Softmax, LayerNorm, RMSNorm, Dropout (layers13a) ----
using ActivationsNet = Chain<Input<5>, Dense<7>, ActivationLayer<ELU>, Dense<6, LeakyReLU<1, 5>>, ActivationLayer<SiLU>,
                             Dense<5, GELUExact>, ActivationLayer<GELUExact>, Dense<4, ELU>, Dense<3, SiLU>, Softmax>;
// The norms after a Flatten of a convolution's output: their weights map through PyTorch's (C, H, W) order.
using NormsNet = Chain<Input<3, 2, 2>, Conv<2, 2, 3, Tanh>, Flatten, LayerNorm, Dense<7, Tanh>, RMSNorm, Dense<3>>;
using DropoutNet = Chain<Input<6>, Dense<9, Tanh>, Dropout<30>, Dense<5, Tanh>, Dropout<1, 3>, Dense<2>>;

// A training-mode case (Dropout active): the loss and gradient from value_and_gradient with the pass,
// dx and a second gradient from the chain's own forward and pullback with the same pass (the pullback
// API is for inference and runs Dropout as the identity), and each Dropout layer's multipliers as
// "dropout_mask.<PyTorch module name>" (samples x features) for the PyTorch model to apply.
template <class Net>
void write_training_case(const std::string& dir, const std::string& name, std::uint64_t seed, const Pass& pass,
                         const std::vector<std::pair<std::size_t, std::string>>& masks) {
    const std::size_t samples = default_samples;
    Rng rng(seed);
    const auto p = normal(Net::num_params, rng, 0.5);
    const auto x = normal(samples * Net::in_size, rng, 1.0);
    const auto t = normal(samples * Net::out_size, rng, 1.0);
    std::vector<double> g(Net::num_params);
    const double loss = value_and_gradient<Net>(p, g, x, t, SquaredError{}, 1, pass);

    const std::size_t n = samples;
    std::vector<double> xt(x.size()), yt(n * Net::out_size), dyt(yt.size()), dxt(x.size()), g2(Net::num_params, 0.0);
    std::vector<double> saved(Net::saved_per_sample * n), scratch(Net::scratch_per_sample * n);
    kernels::gather_transpose(x.data(), Net::in_size, nullptr, n, xt.data());
    Net::forward(p.data(), xt.data(), yt.data(), saved.data(), n, pass);
    for (std::size_t o = 0; o < Net::out_size; ++o)
        for (std::size_t s = 0; s < n; ++s) dyt[o * n + s] = 2 * (yt[o * n + s] - t[s * Net::out_size + o]) / n;
    Net::pullback(p.data(), g2.data(), xt.data(), yt.data(), saved.data(), scratch.data(), dyt.data(), dxt.data(), n);
    std::vector<double> dx(x.size());
    kernels::scatter_transpose(dxt.data(), Net::in_size, n, dx.data());

    std::vector<ExtraTensor> extra;
    for (const auto& [layer, module] : masks) {
        const std::size_t width = Net::width[layer];
        std::vector<double> m(n * width);
        kernels::scatter_transpose(saved.data() + Net::saved_offset[layer] * n, width, n, m.data());
        extra.push_back({"dropout_mask." + module, {n, width}, std::move(m)});
    }
    save_case<Net>(dir, name, p, x, t, loss, g, g2, dx, std::move(extra));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: torch_crosscheck <dir>\n");
        return 2;
    }
    const std::string dir = argv[1];
#if CHAINLET_TORCH_PART == 1
    write_case<ResidualMlp>(dir, "residual_mlp", 1);
    write_case<FewInputsBatch>(dir, "few_inputs_batch", 6, 150);
    write_case<WideBatch>(dir, "wide_batch", 19, 150);
    write_case<DeepONet>(dir, "deeponet", 2);
    write_case<ParallelMix>(dir, "parallel_mix", 3);
    write_case<UserLayerNet>(dir, "user_layer", 4);
    // standalone activations, Softmax, LayerNorm, RMSNorm, Dropout
    write_case<ActivationsNet>(dir, "activations_standalone", 13);
    write_case<NormsNet>(dir, "norms", 14);
    // Dropout layers 2 and 4 of the chain are PyTorch modules "2" and "5" (Linear, Tanh, Dropout, ...).
    write_training_case<DropoutNet>(dir, "dropout_training", 15, Pass{.training = true, .seed = 11, .step = 3},
                                    {{1, "2"}, {3, "5"}});
    // --- recurrent layers ---
    write_case<GruLast>(dir, "gru_last", 101);
    write_case<LstmSequence>(dir, "lstm_sequence", 102);
    write_case<GruSequenceLstm>(dir, "gru_sequence_lstm", 103);
    write_case<LstmGruSequence>(dir, "lstm_gru_sequence", 104);
    // --- end of the recurrent layers ---
#else
    write_case<ConvResidual>(dir, "conv_residual", 5);
    // One sample: a stride-1 convolution's forward and pullback take their own route (vectors along the
    // channels).
    write_case<ConvResidual>(dir, "conv_residual_one_sample", 6, 1);
    write_case<GrayConv>(dir, "gray_conv_one_sample", 7, 1);
    // Two samples in double: with AVX-512 (Workspace::one_by_one = 2) they run one at a time and their
    // gradients are summed; with AVX2 they form a chunk padded to a whole vector (4), as the 7 samples of
    // the other cases are with AVX-512 (8).
    write_case<ConvResidual>(dir, "conv_residual_two_samples", 8, 2);
    write_case<ChannelBlocksConv>(dir, "conv_channel_blocks", 16);
    write_case<ConvPoolBands>(dir, "conv_pool_bands", 17, 16);
    // Conv1D, strides, dilation, average pooling
    write_case<Conv1dNet>(dir, "conv1d_net", 131);
    write_case<Conv1dNet>(dir, "conv1d_net_one_sample", 135, 1);
    write_case<Conv1dDilatedGap>(dir, "conv1d_dilated_gap", 132);
    write_case<StridedConvPool>(dir, "strided_conv_pool", 133);
    write_case<StridedConvFlatten>(dir, "strided_conv_flatten", 134);
#endif
    return 0;
}
