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
    // As AvgPool: the specialisation for the sequences the window fits, the primary template's
    // rejects_shape for any other binding.
    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(P > 0, "AvgPool1D<P>: the window must be positive");
            if constexpr (P > 0) {
                static_assert(InShape::rank == 2,
                              "AvgPool1D needs a sequence input of shape (length, channels); for an image use AvgPool");
                if constexpr (InShape::rank == 2)
                    static_assert(InShape::dims[0] >= P, "AvgPool1D: the window is longer than the sequence");
            }
            return true;
        }();
    };

    template <std::size_t L, std::size_t C>
        requires(P > 0 && L >= P)
    struct bound<Shape<L, C>> : AvgPool<1, P>::template bound<Shape<1, L, C>> {
        using out_shape = Shape<L / P, C>;
        // its own, not AvgPool's (whose `layer` is AvgPool's bound): the same linear rules
        using jet_rule = detail::LinearLayerJetRule<bound>;
        using hvp_rule = detail::LinearLayerHvpRule<bound>;
        static std::string describe() { return "AvgPool1D[" + std::to_string(P) + "]"; }
        static void torch_layout(TorchModules& m, std::size_t) {
            m.skip_module();  // nn.AvgPool1d(P)
            m.natural_order();
        }
    };
};

}  // namespace chainlet
