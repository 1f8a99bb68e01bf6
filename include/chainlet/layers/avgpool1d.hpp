// AvgPool1D<P>: the mean over non-overlapping windows of P positions of a sequence (L, C), per channel;
// the output is (L / P, C) (trailing positions that do not fill a window are dropped, as in PyTorch).
// No parameters. A sequence (L, C) is an image (1, L, C) in memory, so this is AvgPool<1, P> on it
// (layers/avgpool.hpp).
//
// PyTorch: nn.AvgPool1d(P) on (C, L) sequences.
#pragma once

#include <cstddef>
#include <string>

#include "chainlet/layer_metadata.hpp"
#include "chainlet/layers/avgpool.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

template <std::size_t P>
struct AvgPool1D {
    static_assert(P > 0, "AvgPool1D<P>: the window must be positive");

    template <class InShape>
    struct bound {
        static_assert(InShape::rank == 2,
                      "AvgPool1D needs a sequence input of shape (length, channels); for an image use AvgPool");
    };

    template <std::size_t L, std::size_t C>
    struct bound<Shape<L, C>> : AvgPool<1, P>::template bound<Shape<1, (L >= P ? L : P), C>> {
        static_assert(L >= P, "AvgPool1D: the window is longer than the sequence");
        using out_shape = Shape<(L >= P ? L / P : 1), C>;
        static std::string describe() { return "AvgPool1D[" + std::to_string(P) + "]"; }
        static void torch_layout(TorchModules& m, std::size_t) {
            m.skip_module();  // nn.AvgPool1d(P)
            m.natural_order();
        }
    };
};

}  // namespace chainlet
