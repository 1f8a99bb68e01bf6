// Writes, per model, chainlet's input-derivative pass and residual-loss gradient in float64 as JSON
// (one file per case) for tests/pinn_crosscheck.py, which recomputes them with PyTorch autograd
// (double backward). Usage: pinn_crosscheck <out dir>
//
// Each case: the layers as a tree ({"type": "dense", in, out, activation, bias}, {"type": "activation",
// activation}, {"type": "conv", height, width, channels, kernel, out_channels, activation, padding,
// stride, dilation}, the poolings, {"type": "slice", first, count}, {"type": "residual", layers},
// {"type": "parallel", combine, branches: [layers...]}), the parameters in chainlet's layout (in the order of the tree; a
// Dense layer W[i * out + o], then b), the inputs (n x in), the outputs u, du/dx_i, d2u/dx_i^2 for every i and the
// Laplacian, the residual's coefficients, its loss and the parameter gradient.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "support.hpp"
#include "user_layer.hpp"

using namespace chainlet;
using json = nlohmann::json;

namespace {

template <class B, class InShape>
json describe_layer();

// The shape of one sample into layer I of the sequence S.
template <class S, std::size_t I>
struct InShapeAt {
    using type = typename S::template layer<I - 1>::out_shape;
};
template <class S>
struct InShapeAt<S, 0> {
    using type = typename S::in_shape;
};

template <class S>
json describe_sequence() {
    json layers = json::array();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (layers.push_back(describe_layer<typename S::template layer<I>, typename InShapeAt<S, I>::type>()), ...);
    }(std::make_index_sequence<S::num_layers>{});
    return layers;
}

template <class LayerType, class B>
struct Describe;
template <class... Layers, class B>
struct Describe<Residual<Layers...>, B> {
    static json get() { return {{"type", "residual"}, {"layers", describe_sequence<typename B::inner>()}}; }
};
template <class Combine, class... Branches, class B>
struct Describe<Parallel<Combine, Branches...>, B> {
    static json get() {
        json branches = json::array();
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (branches.push_back(describe_sequence<typename B::template branch<I>>()), ...);
        }(std::make_index_sequence<sizeof...(Branches)>{});
        return {{"type", "parallel"}, {"combine", Combine::name}, {"branches", branches}};
    }
};
template <std::size_t First, std::size_t Count, class B>
struct Describe<Slice<First, Count>, B> {
    static json get() { return {{"type", "slice"}, {"first", First}, {"count", Count}}; }
};
template <class Act, class B>
struct Describe<ActivationLayer<Act>, B> {
    static json get() { return {{"type", "activation"}, {"activation", Act::name}}; }
};

template <std::size_t Out, class Act, bool Bias, class B>
struct Describe<Dense<Out, Act, Bias>, B> {
    static json get() {
        return {{"type", "dense"}, {"in", B::in_size}, {"out", Out}, {"activation", Act::name}, {"bias", Bias}};
    }
};

// The layers without a layer_type, by their checkpoint text: linear layers without parameters, the
// identity on a flat input (Flatten, Dropout in the passes), the average poolings of a sequence (L, C),
// stored position-major, the max poolings, FourierFeatures, and the user layer of docs/api.md (its own jet rule).
// A convolution's description text, "Conv[KHxKW,OC,act,pad(,stride=S)]" or "Conv1D[K,OC,act,pad(,stride=S)
// (,dilation=D)]", on an input of shape InShape: (H, W, C) or (L, C), read as (1, L, C).
template <class InShape>
json describe_convolution(const std::string& d) {
    std::size_t kh = 1, kw = 0, oc = 0;
    char act[40] = {}, pad[8] = {};
    const bool conv2d = std::sscanf(d.c_str(), "Conv[%zux%zu,%zu,%39[^,],%7[a-z]", &kh, &kw, &oc, act, pad) == 5;
    if (!conv2d && std::sscanf(d.c_str(), "Conv1D[%zu,%zu,%39[^,],%7[a-z]", &kw, &oc, act, pad) != 4) return nullptr;
    const auto after = [&](const std::string& key) -> std::size_t {
        const auto at = d.find(key);
        return at == std::string::npos ? 1 : std::stoul(d.substr(at + key.size()));
    };
    const std::size_t h = InShape::rank == 3 ? InShape::dims[0] : 1;
    return {{"type", "conv"},       {"height", h},
            {"width", InShape::dims[InShape::rank - 2]}, {"channels", InShape::dims[InShape::rank - 1]},
            {"kernel", json::array({kh, kw})},          {"out_channels", oc},
            {"activation", act},    {"padding", pad},
            {"stride", conv2d ? json::array({after("stride="), after("stride=")}) : json::array({1, after("stride=")})},
            {"dilation", json::array({1, after("dilation=")})}};
}

template <class B, class InShape>
json describe_by_text() {
    const std::string d = B::describe();
    if (d.rfind("Conv", 0) == 0)
        if (json c = describe_convolution<InShape>(d); !c.is_null()) return c;
    if (d == "Flatten" || d.rfind("Dropout[", 0) == 0) return {{"type", "identity"}};
    if (d.rfind("AvgPool1D[", 0) == 0)
        return {{"type", "avgpool1d"}, {"channels", B::out_shape::dims[1]}, {"window", B::in_size / B::out_size}};
    if (d == "GlobalAvgPool") return {{"type", "global_avgpool"}, {"channels", B::out_size}};
    std::size_t ph = 0, pw = 0;
    if constexpr (requires { requires B::in_shape::rank == 3; })  // an image (H, W, C), pixel-major
        if (std::sscanf(d.c_str(), "MaxPool[%zux%zu]", &ph, &pw) == 2)
            return {{"type", "maxpool"}, {"height", B::in_shape::dims[0]}, {"width", B::in_shape::dims[1]},
                    {"channels", B::in_shape::dims[2]}, {"window", json::array({ph, pw})}};
    if constexpr (requires { requires B::out_shape::rank == 2; })
        if (std::sscanf(d.c_str(), "MaxPool1D[%zu]", &pw) == 1)
            return {{"type", "maxpool1d"}, {"channels", B::out_shape::dims[1]}, {"window", pw}};
    if (d.rfind("FourierFeatures[", 0) == 0)  // B (M x F) in the parameters, fixed unless trainable
        return {{"type", "fourier"}, {"in", B::in_size}, {"frequencies", B::out_size / 2},
                {"trainable", detail::fixed_param_count<B>() == 0}};
    if (d == "RMSNorm") return {{"type", "rms_norm"}, {"features", B::in_size}};
    if (d == "LayerNorm") return {{"type", "layer_norm"}, {"features", B::in_size}};
    if (d == "Softmax") return {{"type", "softmax"}};
    if (d == "ScaleShift") return {{"type", "scale_shift"}, {"features", B::in_size}};  // docs/api.md's user layer
    throw std::invalid_argument("pinn_crosscheck: no PyTorch form for " + d);
}

template <class B, class InShape>
json describe_layer() {
    if constexpr (requires { typename B::layer_type; })
        return Describe<typename B::layer_type, B>::get();
    else
        return describe_by_text<B, InShape>();
}

template <class Net>
void write_case(const std::string& dir, const std::string& name, std::uint64_t seed, std::size_t n) {
    constexpr std::size_t F = Net::in_size, O = Net::out_size;
    std::vector<double> p(Net::num_params), g(Net::num_params, 0.0);
    init_params<Net>(p, seed);
    for (auto& v : p) v *= 1.3;
    // biases nonzero, so the bias gradients are exercised away from the symmetric point
    Rng rng(seed + 100);
    for (auto& v : p) v += 0.1 * rng.normal();
    const auto x = test::random_vector(n * F, seed + 1);
    std::vector<std::size_t> all(F);
    for (std::size_t i = 0; i < F; ++i) all[i] = i;
    DerivativeSpec spec = DerivativeSpec::diagonal(F, all);
    spec.second.push_back(all);
    DerivativeWorkspace<Net, double> ws(spec, n, 1);
    const std::size_t C = spec.columns();
    std::vector<double> out(n * O * C);
    ws.derivatives(p.data(), x.data(), out.data(), n);
    // residual on output 0: r = a u + sum_i b_i u_i + sum_i c_i u_ii + c_lap Lap u - sin(x_0); loss mean r^2
    std::vector<double> b(F), c(F + 1);
    for (std::size_t i = 0; i < F; ++i) b[i] = 0.3 + 0.1 * static_cast<double>(i);
    for (std::size_t k = 0; k <= F; ++k) c[k] = -0.4 + 0.25 * static_cast<double>(k);
    const double a = 0.7;
    const auto r = linear_residual<double>(b, c, [](const double* q, std::size_t) { return std::sin(q[0]); }, a);
    const double loss = ws.add_value_and_gradient(p.data(), g.data(), x.data(), n, r, 1.0, 1);

    json j;
    j["name"] = name;
    j["layers"] = describe_sequence<typename Net::sequence>();
    j["inputs"] = F;
    j["params"] = p;
    j["x"] = x;
    j["n"] = n;
    j["outputs"] = O;
    j["columns"] = C;
    j["derivatives"] = out;  // per sample, per output: u, du/dx_0.., d2u/dx_0^2.., Laplacian
    j["residual"] = {{"a", a}, {"b", b}, {"c", c}};
    j["loss"] = loss;
    j["grad"] = g;
    std::ofstream f(dir + "/" + name + ".json");
    f.precision(17);
    f << j.dump();
    if (!f) throw std::runtime_error("cannot write " + dir + "/" + name + ".json");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: pinn_crosscheck <out dir>\n");
        return 2;
    }
    const std::string dir = argv[1];
    write_case<Chain<Input<2>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<32, Tanh>, Dense<1>>>(dir, "poisson_mlp", 1, 70);
    write_case<Chain<Input<3>, Dense<7, GELU>, Dense<5, Softplus>, Dense<2>>>(dir, "gelu_softplus", 2, 33);
    write_case<Chain<Input<1>, Dense<16, Sigmoid>, Dense<1, Tanh>>>(dir, "sigmoid_1d", 3, 19);
    write_case<Chain<Input<4>, Dense<24, Tanh>, DenseNoBias<12, GELU>, Dense<9, Sigmoid>, Dense<8, Softplus>, Dense<3>>>(
        dir, "deep_mixed", 4, 41);
    write_case<Chain<Input<2>, Dense<20, ReLU>, Dense<10, Tanh>, Dense<1>>>(dir, "relu_tanh", 5, 25);
    write_case<Chain<Input<2>, Dense<1, Tanh>>>(dir, "single_layer", 6, 17);
    write_case<Chain<Input<3>, Dense<9, ELU>, Dense<8, SiLU>, DenseNoBias<7, GELUExact>, Dense<6, LeakyReLU<1, 5>>,
                     Dense<2>>>(dir, "elu_silu_gelu_erf_leaky", 13, 37);
    write_case<Chain<Input<2>, Dense<12, Sin<30>>, Dense<10, Sin<>>, Dense<1>>>(dir, "siren", 14, 23);
    // linear layers without parameters (their rules run the layer's own forward and pullback on the columns)
    write_case<Chain<Input<6, 2>, AvgPool1D<2>, Flatten, Dense<8, Tanh>, Dropout<10>, Dense<1>>>(dir, "pool_dropout", 15, 21);
    write_case<Chain<Input<4, 3>, GlobalAvgPool, Dense<6, Sin<>>, Dense<1>>>(dir, "global_avgpool", 16, 19);
    write_case<Chain<Input<7, 2>, MaxPool1D<2>, Flatten, Dense<8, Tanh>, Dense<1>>>(dir, "maxpool1d", 19, 21);
    write_case<Chain<Input<4, 2, 2>, MaxPool<2>, Flatten, Dense<6, Softplus>, Dense<1>>>(dir, "maxpool", 20, 19);
    // convolutions: valid, same, strided, dilated (their rules, layers/conv_rules.hpp)
    write_case<Chain<Input<4, 3, 1>, Conv<3, 3, 3, Tanh, Padding::same>, Conv<2, 2, 2, Softplus, Padding::valid, 2>,
                     Flatten, Dense<6, Tanh>, Dense<1>>>(dir, "conv", 21, 19);
    write_case<Chain<Input<7, 2>, Conv1D<3, 3, GELU, Padding::same>, Conv1D<2, 2, Tanh, Padding::valid, 2, 2>, Flatten,
                     Dense<1>>>(dir, "conv1d", 22, 21);
    // RMSNorm, LayerNorm and Softmax (their own rules)
    write_case<Chain<Input<3>, Dense<7, Tanh>, RMSNorm, Dense<5, GELU>, RMSNorm, Dense<2>>>(dir, "rms_norm", 23, 21);
    write_case<Chain<Input<3>, Dense<7, Tanh>, LayerNorm, Dense<5, Softplus>, LayerNorm, Dense<2>>>(dir, "layer_norm", 24, 19);
    write_case<Chain<Input<3>, Dense<6, Tanh>, Softmax, Dense<5, Tanh>, Softmax, Dense<2>>>(dir, "softmax", 25, 17);
    // random Fourier features (fixed frequencies, no parameters; its own rules)
    write_case<Chain<Input<2>, FourierFeatures<8, 3, 2>, Dense<10, Tanh>, Dense<1>>>(dir, "fourier", 18, 21);
    write_case<Chain<Input<2>, TrainableFourierFeatures<8, 3, 2>, Dense<10, Tanh>, Dense<1>>>(dir, "fourier_trainable", 18, 22);
    // a layer written by a user from docs/api.md, with its own jet rule (tests/user_layer.hpp)
    write_case<Chain<Input<2>, Dense<8, Tanh>, ScaleShift, Dense<6, Sin<>>, ScaleShift, Dense<1>>>(dir, "user_layer", 17,
                                                                                                 23);
    // containers (the input-derivative pass goes through them)
    write_case<Chain<Input<3>, Dense<8, Tanh>, Residual<Dense<8, Tanh>>, Dense<1>>>(dir, "residual", 7, 29);
    write_case<Chain<Input<3>, Parallel<Dot, Branch<Slice<0, 1>, Dense<12, Tanh>, Dense<8>>,
                                        Branch<Slice<1, 2>, Dense<12, GELU>, Residual<Dense<12, Tanh>>, Dense<8, Tanh>>>>>(
        dir, "deeponet_dot", 8, 31);
    write_case<Chain<Input<2>, Residual<Dense<2, Softplus>>,
                     Parallel<Concat, Branch<Dense<6, Tanh>>, Branch<Slice<1, 1>, Dense<5, Sigmoid>>, Branch<Slice<0, 2>>>,
                     ActivationLayer<Tanh>, Parallel<Sum, Branch<Dense<4, GELU>>, Branch<Dense<4>, ActivationLayer<Softplus>>>,
                     Dense<2>>>(dir, "concat_sum", 9, 23);
    write_case<Chain<Input<2>, Dense<10, Tanh>,
                     Parallel<Product, Branch<Dense<6, Tanh>>, Branch<Slice<2, 8>, Dense<6, Sigmoid>>>, Dense<1>>>(
        dir, "product", 10, 27);
    write_case<Chain<Input<3>, Parallel<Product, Branch<Slice<0, 1>, Dense<6, Tanh>>, Branch<Slice<1, 2>, Dense<6, Sigmoid>>,
                                        Branch<Dense<6, GELU>>>,
                     Dense<1>>>(dir, "product3", 11, 21);
    write_case<Chain<Input<2>, Parallel<Dot, Branch<Dense<5, Tanh>>, Branch<Slice<1, 1>, Dense<5, Tanh>>,
                                        Branch<Dense<5, Softplus>>, Branch<Slice<0, 1>, Dense<5>>>>>(dir, "dot4", 12, 25);
    return 0;
}
