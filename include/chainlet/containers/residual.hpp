// Residual<Layers...>: y = x + f(x), where f is the chain of Layers (which must keep the shape of x).
//
// Pullback: dx = dy + J_f^T dy, g_f += J_p^T dy (the inner chain's pullback).
//
// PyTorch: a module with the inner layers as an nn.Sequential attribute `f` and forward x + f(x), as
// `Residual` in python/chainlet_torch.py; tensor names read "<index>.f.<inner index>.weight".
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "chainlet/chain.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"

namespace chainlet {

template <class... Layers>
struct Residual {
    template <class InShape>
    struct bound {
        // Without inner layers, the stand-in chain (chain.hpp): the assertion below is then the only error
        // (one in Residual's class body was followed by 1-2 more from the empty chain it named).
        using inner = std::conditional_t<sizeof...(Layers) == 0, detail::stand_in_sequence,
                                         detail::Sequence<InShape, Layers...>>;
        using layer_type = Residual;  // for passes with their own rules (derivatives/taylor.hpp)
        // (layer.hpp) An inner layer that rejected its shape has said why: then nothing more is asserted.
        static constexpr bool rejects_shape = [] {
            if constexpr (sizeof...(Layers) == 0) {
                static_assert(sizeof...(Layers) >= 1, "Residual<Layers...> needs at least one inner layer");
                return true;
            } else if constexpr (inner::rejects_shape) {
                return true;
            } else {
                static_assert(std::is_same_v<typename inner::out_shape, InShape>,
                              "Residual<Layers...>: the inner layers must give an output of the same shape as their "
                              "input (y = x + f(x))");
                return !std::is_same_v<typename inner::out_shape, InShape>;
            }
        }();
        static constexpr std::size_t in_size = InShape::size, out_size = InShape::size;
        using out_shape = InShape;
        static constexpr std::size_t num_params = inner::num_params;
        // Saved: f(x), then the inner chain's saved storage. Scratch: the cotangent handed to the inner
        // chain (its pullback clobbers it, and dy is still needed for the skip), then the inner scratch.
        static constexpr std::size_t saved_per_sample = out_size + inner::saved_per_sample;
        static constexpr std::size_t scratch_per_sample = out_size + inner::scratch_per_sample;

        template <class T>
        static void init(std::span<T> p, Rng& rng, InitKind kind) {
            inner::init(p, rng, kind);
        }

        template <class T>
        static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n, const Pass& pass) {
            T* fx = saved;
            inner::forward(p, x, fx, saved + out_size * n, n, pass);
            std::copy_n(x, in_size * n, y);
            kernels::add_to(y, fx, out_size * n);
        }

        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T*, T* saved, T* scratch, T* dy, T* dx,
                             std::size_t n) {
            T* inner_dy = scratch;
            std::copy_n(dy, out_size * n, inner_dy);
            inner::pullback(p, g, x, saved, saved + out_size * n, scratch + out_size * n, inner_dy, dx, n);
            if (dx) kernels::add_to(dx, dy, in_size * n);
        }

        static std::string describe() { return "Residual{" + inner::describe() + "}"; }
        static void torch_layout(TorchModules& m, std::size_t offset) {
            if (!m.natural())
                throw std::invalid_argument(
                    "Residual right after a Flatten of an image: PyTorch flattens (C, H, W), chainlet (H, W, C), so "
                    "the skip connection has no PyTorch equivalent; put a Dense layer before the Residual");
            const std::string name = m.next_module();
            m.nested(name + ".f", [&] { inner::torch_layout(m, offset); });
            m.natural_order();
        }
    };
};

}  // namespace chainlet
