// What a Chain is, as data: a canonical text naming the input shape and every layer (kind, sizes,
// activation), written into checkpoints so a file can only be loaded into the same architecture, and
// the PyTorch nn.Sequential view of the parameters (tensor names, shapes, and where each element of a
// PyTorch tensor lives in chainlet's flat parameter buffer), used by the safetensors export/import.
//
// Layouts (see the layer headers):
//   Dense   chainlet W[i * Out + o]                   PyTorch Linear.weight[o][i]            ([out, in])
//   Conv    chainlet W[((ky * KW + kx) * C + c) * OC + oc]  Conv2d.weight[oc][c][ky][kx]   ([out, in, kh, kw])
//   images  chainlet (H, W, C), channels last         PyTorch (C, H, W)
// So the Dense right after a Flatten of an (H, W, C) image reads PyTorch feature (c * H + y) * W + x
// where chainlet has feature (y * W + x) * C + c. Activations other than Identity are separate modules
// of nn.Sequential and take a module index of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chainlet/activations.hpp"
#include "chainlet/chain.hpp"
#include "chainlet/layers/conv.hpp"
#include "chainlet/layers/dense.hpp"
#include "chainlet/layers/flatten.hpp"
#include "chainlet/layers/maxpool.hpp"

namespace chainlet {

// One tensor of the PyTorch state_dict: source[k] is the chainlet parameter index of element k of the
// tensor in row-major order.
struct TorchTensor {
    std::string name;
    std::vector<std::uint64_t> shape;
    std::vector<std::size_t> source;
};

namespace detail {

template <class S>
struct shape_dims;
template <std::size_t... D>
struct shape_dims<Shape<D...>> {
    static std::vector<std::size_t> get() { return {D...}; }
};

inline std::string join_dims(const std::vector<std::size_t>& d, const char* sep) {
    std::string s;
    // append() rather than `const char* + std::string`, on which g++ 12 raises a false -Wrestrict.
    for (std::size_t i = 0; i < d.size(); ++i) s.append(i ? sep : "").append(std::to_string(d[i]));
    return s;
}

// Walk state: the next nn.Sequential module index, and the (H, W, C) image a Flatten just flattened.
struct TorchWalk {
    std::size_t module = 0;
    bool after_flatten = false;
    std::size_t fh = 0, fw = 0, fc = 0;
    std::vector<TorchTensor> tensors;

    void activation(const char* name) {
        if (std::string(name) != Identity::name) ++module;
    }
};

}  // namespace detail

// layer_info<L> describes an (unbound) layer type; specialise it for a new layer kind.
template <class L>
struct layer_info {
    static_assert(sizeof(L) == 0, "chainlet::layer_info has no description of this layer type: specialise it");
};

template <std::size_t Out, class Act, bool Bias>
struct layer_info<Dense<Out, Act, Bias>> {
    static std::string describe(const std::vector<std::size_t>&) {
        return "Dense[" + std::to_string(Out) + "," + Act::name + (Bias ? "" : ",nobias") + "]";
    }
    static void torch(const std::vector<std::size_t>& in, std::size_t offset, detail::TorchWalk& w) {
        const std::size_t In = in[0], idx = w.module++;
        TorchTensor weight{std::to_string(idx) + ".weight", {Out, In}, std::vector<std::size_t>(Out * In)};
        for (std::size_t o = 0; o < Out; ++o)
            for (std::size_t j = 0; j < In; ++j) {
                std::size_t i = j;  // chainlet's input feature for PyTorch's feature j
                if (w.after_flatten) {
                    const std::size_t c = j / (w.fh * w.fw), y = j / w.fw % w.fh, x = j % w.fw;
                    i = (y * w.fw + x) * w.fc + c;
                }
                weight.source[o * In + j] = offset + i * Out + o;
            }
        w.tensors.push_back(std::move(weight));
        if constexpr (Bias) {
            TorchTensor bias{std::to_string(idx) + ".bias", {Out}, std::vector<std::size_t>(Out)};
            for (std::size_t o = 0; o < Out; ++o) bias.source[o] = offset + In * Out + o;
            w.tensors.push_back(std::move(bias));
        }
        w.after_flatten = false;
        w.activation(Act::name);
    }
};

template <std::size_t KH, std::size_t KW, std::size_t OC, class Act, Padding Pad>
struct layer_info<Conv<KH, KW, OC, Act, Pad>> {
    static std::string describe(const std::vector<std::size_t>&) {
        return "Conv[" + std::to_string(KH) + "x" + std::to_string(KW) + "," + std::to_string(OC) + "," + Act::name +
               "," + (Pad == Padding::same ? "same" : "valid") + "]";
    }
    static void torch(const std::vector<std::size_t>& in, std::size_t offset, detail::TorchWalk& w) {
        const std::size_t C = in[2], idx = w.module++;
        TorchTensor weight{std::to_string(idx) + ".weight", {OC, C, KH, KW}, std::vector<std::size_t>(OC * C * KH * KW)};
        for (std::size_t oc = 0; oc < OC; ++oc)
            for (std::size_t c = 0; c < C; ++c)
                for (std::size_t ky = 0; ky < KH; ++ky)
                    for (std::size_t kx = 0; kx < KW; ++kx)
                        weight.source[((oc * C + c) * KH + ky) * KW + kx] = offset + ((ky * KW + kx) * C + c) * OC + oc;
        TorchTensor bias{std::to_string(idx) + ".bias", {OC}, std::vector<std::size_t>(OC)};
        for (std::size_t oc = 0; oc < OC; ++oc) bias.source[oc] = offset + KH * KW * C * OC + oc;
        w.tensors.push_back(std::move(weight));
        w.tensors.push_back(std::move(bias));
        w.after_flatten = false;
        w.activation(Act::name);
    }
};

template <std::size_t PH, std::size_t PW>
struct layer_info<MaxPool<PH, PW>> {
    static std::string describe(const std::vector<std::size_t>&) {
        return "MaxPool[" + std::to_string(PH) + "x" + std::to_string(PW) + "]";
    }
    static void torch(const std::vector<std::size_t>&, std::size_t, detail::TorchWalk& w) {
        ++w.module;
        w.after_flatten = false;
    }
};

template <>
struct layer_info<Flatten> {
    static std::string describe(const std::vector<std::size_t>&) { return "Flatten"; }
    // A flattened (H, W, C) image: PyTorch flattens (C, H, W), so the next Dense permutes its columns.
    static void torch(const std::vector<std::size_t>& in, std::size_t, detail::TorchWalk& w) {
        ++w.module;
        w.after_flatten = in.size() == 3;
        if (w.after_flatten) w.fh = in[0], w.fw = in[1], w.fc = in[2];
    }
};

template <class Net>
struct architecture;

template <std::size_t... Dims, class... Layers>
struct architecture<Chain<Input<Dims...>, Layers...>> {
    using Net = Chain<Input<Dims...>, Layers...>;

    template <std::size_t I>
    static std::vector<std::size_t> in_dims() {
        if constexpr (I == 0) return detail::shape_dims<typename Net::in_shape>::get();
        else return detail::shape_dims<typename Net::template layer<I - 1>::out_shape>::get();
    }

    // e.g. "Input[28,28,1] Conv[5x5,6,relu,valid] MaxPool[2x2] Flatten Dense[10,identity]"
    static std::string text() {
        std::string s = "Input[";
        s.append(detail::join_dims({Dims...}, ",")).append("]");
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            ((s.append(" ").append(layer_info<Layers>::describe(in_dims<I>()))), ...);
        }(std::index_sequence_for<Layers...>{});
        return s;
    }

    // The state_dict of the equivalent nn.Sequential, in module order.
    static std::vector<TorchTensor> torch_tensors() {
        detail::TorchWalk w;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (layer_info<Layers>::torch(in_dims<I>(), Net::param_offset[I], w), ...);
        }(std::index_sequence_for<Layers...>{});
        return std::move(w.tensors);
    }
};

}  // namespace chainlet
