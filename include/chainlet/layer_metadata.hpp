// What a layer says about itself for the file formats: the text that names it in a checkpoint's
// architecture, and the PyTorch modules and tensors it corresponds to (for safetensors). The layers
// write this next to their own code (their describe() and torch_layout(), see layer.hpp); io/ only walks
// a chain and asks each layer, so a user layer opts in to checkpoints and safetensors the same way.
//
// PyTorch's view of a chain is an nn.Sequential: every layer takes the next module index, and a fused
// activation other than identity takes one more (Dense<8, Tanh> is Linear then Tanh). Containers open a
// nested module (see the container headers for their PyTorch classes), so names read like
// "3.f.0.weight" or "2.branches.1.0.bias".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "chainlet/shape.hpp"

namespace chainlet {

// One tensor of the PyTorch state_dict: source[k] is the chainlet parameter index of element k of the
// tensor in row-major order.
struct TorchTensor {
    std::string name;
    std::vector<std::uint64_t> shape;
    std::vector<std::size_t> source;
};

// Collects the tensors of a chain while its layers describe themselves, in module order.
class TorchModules {
public:
    // The name of the next module in the current nn.Sequential (e.g. "3" or "2.f.0"), which it takes.
    std::string next_module() { return prefix_ + std::to_string(index_++); }
    // A module without parameters (MaxPool, Flatten, a standalone activation) takes an index too.
    void skip_module() { ++index_; }
    // The module of a fused activation: none for identity, one index otherwise.
    void activation(const std::string& name) {
        if (name != "identity") ++index_;
    }
    void add(TorchTensor t) { tensors_.push_back(std::move(t)); }

    // The feature order of the current (flat) tensor: PyTorch's feature j is chainlet's feature
    // input_feature(j). Chainlet flattens images (H, W, C) channels last, PyTorch (C, H, W), so after a
    // Flatten of an image the two orders differ until a layer that mixes features (Dense) consumes it.
    // A layer whose output is in PyTorch's order calls natural_order(); elementwise layers leave it.
    std::size_t input_feature(std::size_t j) const {
        if (!fh_) return j;
        const std::size_t c = j / (fh_ * fw_), y = j / fw_ % fh_, x = j % fw_;
        return (y * fw_ + x) * fc_ + c;
    }
    bool natural() const { return fh_ == 0; }
    void flattened_image(std::size_t h, std::size_t w, std::size_t c) { fh_ = h, fw_ = w, fc_ = c; }
    void natural_order() { fh_ = fw_ = fc_ = 0, time_major_ = false; }
    // A sequence (L, C) is (C, L) in PyTorch after a Conv1D (nn.Conv1d's layout), but (L, C) after a GRU or
    // LSTM (batch_first=True): the recurrent layers call time_major_sequence() after natural_order(), and
    // a Flatten of a sequence permutes the features only when time_major() is false.
    void time_major_sequence() { time_major_ = true; }
    bool time_major() const { return time_major_; }

    // Runs body with module names inside the nested nn.Sequential `name` (e.g. a Residual's "3.f",
    // with "3" from next_module()); the outer numbering continues afterwards.
    template <class F>
    void nested(const std::string& name, F&& body) {
        const std::string saved_prefix = prefix_;
        const std::size_t saved_index = index_;
        prefix_ = name + ".";
        index_ = 0;
        body();
        prefix_ = saved_prefix;
        index_ = saved_index;
    }

    std::vector<TorchTensor> take() { return std::move(tensors_); }

private:
    std::string prefix_;
    std::size_t index_ = 0;
    std::size_t fh_ = 0, fw_ = 0, fc_ = 0;
    bool time_major_ = false;
    std::vector<TorchTensor> tensors_;
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

}  // namespace detail

}  // namespace chainlet
