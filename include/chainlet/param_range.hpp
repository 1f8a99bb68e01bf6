// A run of entries of a flat parameter buffer, [first, first + count): how a network's fixed parameters
// (layer.hpp, num_fixed_params) are handed to an optimiser that must leave them as they are.
#pragma once

#include <cstddef>

namespace chainlet {

struct ParamRange {
    std::size_t first = 0, count = 0;
    friend bool operator==(const ParamRange&, const ParamRange&) = default;
};

}  // namespace chainlet
