// What a Chain is, as data, for the file formats: a canonical text naming the input shape and every
// layer (kind, sizes, activation), written into checkpoints so a file can only be loaded into the same
// architecture, and the PyTorch view of the parameters (tensor names, shapes, and where each element of
// a PyTorch tensor lives in chainlet's flat parameter buffer), used by the safetensors export/import.
// Both come from the layers themselves (their describe() and torch_layout(): layer.hpp,
// layer_metadata.hpp); this header knows no particular layer.
#pragma once

#include <string>
#include <vector>

#include "chainlet/layer_metadata.hpp"

namespace chainlet {

template <class Net>
struct architecture {
    // e.g. "Input[28,28,1] Conv[5x5,6,relu,valid] MaxPool[2x2] Flatten Dense[10,identity]"
    static std::string text() { return Net::describe(); }

    // The state_dict of the equivalent PyTorch module (an nn.Sequential of the layers), in module order.
    static std::vector<TorchTensor> torch_tensors() {
        TorchModules m;
        Net::torch_layout(m, 0);
        return m.take();
    }
};

}  // namespace chainlet
