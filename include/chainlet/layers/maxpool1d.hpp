// MaxPool1D<P>: the maximum over non-overlapping windows of P positions of a sequence (L, C), per channel;
// the output is (L / P, C) (trailing positions that do not fill a window are dropped, as in PyTorch).
// No parameters. A sequence (L, C) is an image (1, L, C) in memory, so this is MaxPool<1, P> on it
// (layers/maxpool.hpp: ties pass the cotangent to the first maximal position).
//
// PyTorch: nn.MaxPool1d(P) on (C, L) sequences.
#pragma once

#include <cstddef>
#include <string>

#include "chainlet/layer_metadata.hpp"
#include "chainlet/layers/maxpool.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

template <std::size_t P>
struct MaxPool1D {
    // As MaxPool: the specialisation for the sequences the window fits, the primary template's
    // rejects_shape for any other binding.
    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(P > 0, "MaxPool1D<P>: the window must be positive");
            if constexpr (P > 0) {
                static_assert(InShape::rank == 2,
                              "MaxPool1D needs a sequence input of shape (length, channels); for an image use MaxPool");
                if constexpr (InShape::rank == 2)
                    static_assert(InShape::dims[0] >= P, "MaxPool1D: the window is longer than the sequence");
            }
            return true;
        }();
    };

    template <std::size_t L, std::size_t C>
        requires(P > 0 && L >= P)
    struct bound<Shape<L, C>> : MaxPool<1, P>::template bound<Shape<1, L, C>> {
        using out_shape = Shape<L / P, C>;
        // its own, not MaxPool's (whose `layer` is MaxPool's bound): the same piecewise-linear rules
        using jet_rule = typename MaxPool<1, P>::template bound<Shape<1, L, C>>::template jet_rule_for<bound>;
        using hvp_rule = typename MaxPool<1, P>::template bound<Shape<1, L, C>>::template hvp_rule_for<bound>;
        static std::string describe() { return "MaxPool1D[" + std::to_string(P) + "]"; }
        static void torch_layout(TorchModules& m, std::size_t) {
            m.skip_module();  // nn.MaxPool1d(P)
            m.natural_order();
        }
    };
};

}  // namespace chainlet
