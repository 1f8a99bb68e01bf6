// Compile-time shapes. A shape is a list of extents; images are (height, width, channels).
#pragma once

#include <cstddef>

namespace chainlet {

template <std::size_t... Dims>
struct Shape {
    static_assert(sizeof...(Dims) >= 1, "a shape needs at least one extent");
    static_assert(((Dims > 0) && ...), "every extent of a shape must be positive");
    static constexpr std::size_t rank = sizeof...(Dims);
    static constexpr std::size_t size = (Dims * ...);
    static constexpr std::size_t dims[sizeof...(Dims)] = {Dims...};
};

// The first element of a Chain: the shape of one input sample, e.g. Input<4> or Input<28, 28, 1>.
template <std::size_t... Dims>
struct Input {
    using shape = Shape<Dims...>;
};

}  // namespace chainlet
