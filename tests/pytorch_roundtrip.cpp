// The C++ half of the PyTorch round trip (tests/pytorch_roundtrip.py drives it), as two programs with
// half the models each (pytorch_roundtrip_1, _2; see run() below):
//   pytorch_roundtrip_<part> export <dir>
//                                     writes <model>_<dtype>.safetensors (initial parameters, each moved)
//                                     and <model>_<dtype>_io.safetensors ("inputs" in chainlet's layout,
//                                     "outputs" = chainlet's predictions) for every model and dtype
//   pytorch_roundtrip_<part> import <dir>
//                                     reads <model>_<dtype>_torch.safetensors and ..._torch_io.safetensors
//                                     written by PyTorch, predicts, and compares with PyTorch's outputs
// Models: an MLP with tanh, a small conv chain (valid and same padding, pooling, flatten, dense),
// LeNet5, a Conv1D sequence net, a strided-conv net with average pooling, standalone activations and
// norms, and a GRU (whole sequence) into an LSTM (last state). Predictions agree when
// max|chainlet - torch| <= 1e-5 max|torch| (exit status 1 otherwise).
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/safetensors.hpp"

#ifndef CHAINLET_TORCH_PART
#error "define CHAINLET_TORCH_PART as 1 or 2 (tests/CMakeLists.txt)"
#endif

using namespace chainlet;

namespace {

using Mlp = Chain<Input<4>, Dense<16, Tanh>, Dense<8, Tanh>, Dense<3>>;
using SmallConv = Chain<Input<12, 10, 2>, Conv<3, 3, 4, ReLU>, MaxPool<2>, Conv<3, 3, 5, Tanh, Padding::same>,
                        MaxPool<2>, Flatten, Dense<7, Tanh>, Dense<3>>;
using LeNet5 = Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2, 2>, Conv<5, 5, 16, ReLU>, MaxPool<2, 2>, Flatten,
                     Dense<120, ReLU>, Dense<84, ReLU>, Dense<10>>;
// Issue 13's layers: standalone activations, LayerNorm and RMSNorm (weights in PyTorch's order after a
// Flatten of an image), Dropout (the identity in predict, nn.Dropout in eval mode), a final Softmax.
using Issue13 = Chain<Input<4, 3, 2>, Conv<2, 2, 3>, ActivationLayer<ELU>, Flatten, LayerNorm, Dropout<25>,
                      Dense<8, GELUExact>, RMSNorm, Dense<5, LeakyReLU<1, 5>>, ActivationLayer<SiLU>, Dense<3>, Softmax>;

// A sequence (L, C) net with Conv1D (same, stride, dilation), MaxPool1D, AvgPool1D
// and Flatten of a sequence; an image net with a strided Conv, AvgPool and GlobalAvgPool.
using SeqConv = Chain<Input<20, 3>, Conv1D<5, 8, ReLU, Padding::same>, MaxPool1D<2>, Conv1D<3, 6, Tanh, Padding::valid, 2>,
                      AvgPool1D<2>, Conv1D<2, 4, Softplus, Padding::same, 1, 2>, Flatten, Dense<3>>;
using StridedConv = Chain<Input<15, 13, 2>, Conv<3, 3, 6, ReLU, Padding::valid, 2>, AvgPool<2>, Conv<2, 2, 4, Tanh>,
                          GlobalAvgPool, Dense<3>>;

// Recurrent layers: a sequence Input<T, F> is PyTorch's batch_first (batch, T, F).
using Recurrent = Chain<Input<9, 3>, GRU<6, true>, LSTM<5>, Dense<2>>;
constexpr std::size_t samples = 5;

template <class Net>
std::vector<std::uint64_t> io_shape(std::size_t n, bool input) {
    std::vector<std::uint64_t> s{n};
    if (!input) return {n, Net::out_size};
    for (auto d : detail::shape_dims<typename Net::in_shape>::get()) s.push_back(d);
    return s;
}

template <class Net, class T>
void export_model(const std::string& dir, const std::string& name) {
    std::vector<T> p(Net::num_params);
    init_params<Net>(p, 17);
    Rng rng(23);
    std::vector<T> x(samples * Net::in_size);
    for (auto& v : x) v = static_cast<T>(rng.normal());
    // Every parameter moved off its initial value (biases off zero, norm gains off one), so a parameter
    // read into the wrong place shows in the predictions.
    for (auto& v : p) v += static_cast<T>(0.1 * rng.normal());
    std::vector<T> out(samples * Net::out_size);
    predict<Net>(p, x, out);
    const std::string stem = dir + "/" + name + "_" + detail::safetensors_dtype<T>();
    export_safetensors<Net>(stem + ".safetensors", p);
    write_safetensors(stem + "_io.safetensors",
                      {{"inputs", detail::safetensors_dtype<T>(), io_shape<Net>(samples, true), std::as_bytes(std::span(x))},
                       {"outputs", detail::safetensors_dtype<T>(), io_shape<Net>(samples, false), std::as_bytes(std::span(out))}});
    std::printf("exported %s (%zu parameters)\n", (stem + ".safetensors").c_str(), Net::num_params);
}

template <class Net, class T>
bool import_model(const std::string& dir, const std::string& name) {
    const std::string stem = dir + "/" + name + "_" + detail::safetensors_dtype<T>() + "_torch";
    std::vector<T> p(Net::num_params);
    import_safetensors<Net>(stem + ".safetensors", p);
    const auto io = read_safetensors(stem + "_io.safetensors");
    const auto x = io.values<T>("inputs");
    const auto ref = io.values<T>("outputs");
    if (x.size() % Net::in_size != 0 || ref.size() != x.size() / Net::in_size * Net::out_size) {
        std::printf("%s: inputs and outputs do not match the chain's sizes\n", stem.c_str());
        return false;
    }
    std::vector<T> out(ref.size());
    predict<Net>(p, x, out);
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const double d = std::abs(static_cast<double>(out[i]) - static_cast<double>(ref[i]));
        diff = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(diff, d);  // std::max passes a NaN over
        scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
    }
    const double rel = diff / scale;
    const bool ok = rel <= 1e-5;
    std::printf("%s %s: chainlet vs PyTorch predictions, max |diff| / max |torch| = %.3g (%zu outputs)\n",
                ok ? "ok  " : "FAIL", stem.c_str(), rel, out.size());
    return ok;
}

// The models are split between two programs built from this file (CHAINLET_TORCH_PART 1: dense,
// normalisation and recurrent; 2: convolutional), which keeps each one's compile time and memory small.
template <class T>
bool run(const std::string& mode, const std::string& dir) {
    if (mode == "export") {
#if CHAINLET_TORCH_PART == 1
        export_model<Mlp, T>(dir, "mlp");
        export_model<Issue13, T>(dir, "issue13");
        export_model<Recurrent, T>(dir, "recurrent");
#else
        export_model<SmallConv, T>(dir, "smallconv");
        export_model<LeNet5, T>(dir, "lenet5");
        export_model<SeqConv, T>(dir, "seqconv");
        export_model<StridedConv, T>(dir, "stridedconv");
#endif
        return true;
    }
#if CHAINLET_TORCH_PART == 1
    bool ok = import_model<Issue13, T>(dir, "issue13");
    ok = import_model<Mlp, T>(dir, "mlp") && ok;
    return import_model<Recurrent, T>(dir, "recurrent") && ok;
#else
    bool ok = import_model<SmallConv, T>(dir, "smallconv");
    ok = import_model<SeqConv, T>(dir, "seqconv") && ok;
    ok = import_model<StridedConv, T>(dir, "stridedconv") && ok;
    return import_model<LeNet5, T>(dir, "lenet5") && ok;
#endif
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3 || (std::string(argv[1]) != "export" && std::string(argv[1]) != "import")) {
        std::fprintf(stderr, "usage: %s export|import <dir>\n", argv[0]);
        return 2;
    }
    try {
        const bool f = run<float>(argv[1], argv[2]);
        const bool d = run<double>(argv[1], argv[2]);
        return f && d ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pytorch_roundtrip: %s\n", e.what());
        return 1;
    }
}
