// Flatten: an (H, W, C) image becomes H * W * C features in the same order (channels last), so a
// Dense layer can follow a Conv or MaxPool. No parameters; forward and pullback are copies, and so are
// the derivative passes' rules (jet.hpp's rules of a linear layer).
// PyTorch: nn.Flatten() (see torch_layout for the feature order).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>

#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

struct Flatten {
    template <class InShape>
    struct bound {
        static constexpr std::size_t in_size = InShape::size;
        static constexpr std::size_t out_size = InShape::size;
        using out_shape = Shape<InShape::size>;
        static constexpr std::size_t num_params = 0;
        static constexpr std::size_t saved_per_sample = 0, scratch_per_sample = 0;
        using jet_rule = detail::LinearLayerJetRule<bound>;  // the derivative passes' rules (jet.hpp)
        using hvp_rule = detail::LinearLayerHvpRule<bound>;

        template <class T>
        static void init(std::span<T>, Rng&, InitKind) {}
        template <class T>
        static void forward(const T*, const T* x, T* y, T*, std::size_t n) {
            std::copy_n(x, in_size * n, y);
        }
        template <class T>
        static void pullback(const T*, T*, const T*, const T*, T*, T*, T* dy, T* dx, std::size_t n) {
            // A loop, not std::copy_n: g++ 12 with AVX2 inlined copy_n's memmove into a strided network's
            // pullback (tests/test_conv1d_training.cpp) and warned -Warray-bounds about a region it took for empty.
            if (dx)
                for (std::size_t i = 0; i < in_size * n; ++i) dx[i] = dy[i];
        }

        static std::string describe() { return "Flatten"; }
        // PyTorch's nn.Flatten() of a (C, H, W) image orders the features (c, y, x); chainlet keeps (y, x, c).
        static void torch_layout(TorchModules& m, std::size_t) {
            m.skip_module();
            if constexpr (InShape::rank == 3) m.flattened_image(InShape::dims[0], InShape::dims[1], InShape::dims[2]);
            // A sequence (L, C) is (C, L) in PyTorch: its features are ordered (c, l), as an image (L, 1, C)'s;
            // except the output of a GRU/LSTM, (T, H) in PyTorch too (TorchModules::time_major).
            if constexpr (InShape::rank == 2)
                if (!m.time_major()) m.flattened_image(InShape::dims[0], 1, InShape::dims[1]);
        }
    };
};

}  // namespace chainlet
