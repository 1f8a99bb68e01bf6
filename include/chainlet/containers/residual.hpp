// Residual<Layers...>: y = x + f(x), where f is the chain of Layers (which must keep the shape of x).
//
// Pullback: dx = dy + J_f^T dy, g_f += J_p^T dy (the inner chain's pullback). The derivative passes'
// rules (layer.hpp), below the layer.
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
#include "chainlet/jet.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"

namespace chainlet {

namespace detail {
template <class B>
struct ResidualJetRule;
template <class B>
struct ResidualHvpRule;
}  // namespace detail

template <class... Layers>
struct Residual {
    template <class InShape>
    struct bound {
        // Without inner layers, the stand-in chain (chain.hpp): the assertion below is then the only error
        // (one in Residual's class body was followed by 1-2 more from the empty chain it named).
        using inner = std::conditional_t<sizeof...(Layers) == 0, detail::stand_in_sequence,
                                         detail::Sequence<InShape, Layers...>>;
        using layer_type = Residual;
        using jet_rule = detail::ResidualJetRule<bound>;  // the derivative passes' rules (below)
        using hvp_rule = detail::ResidualHvpRule<bound>;
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
        static constexpr std::size_t num_fixed_params = detail::fixed_param_count<inner>();  // layer.hpp
        static constexpr bool fixed_param(std::size_t i) { return detail::is_fixed_param<inner>(i); }
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

namespace detail {

// Input derivatives (jet.hpp): every column adds, y_c = x_c + f(x)_c. Pullback: xbar = ybar + J_f^T ybar (the
// inner chain's pullback of a copy of ybar, which it clobbers). Scratch: that copy, then the inner scratch.
template <class B>
struct ResidualJetRule {
    using layer = B;
    using inner = jet_rule_of<typename B::inner>;
    static constexpr bool available = rule_available<inner>();
    static constexpr std::size_t F = B::in_size;
    static constexpr std::size_t saved = inner::saved, scratch = F + inner::scratch;

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        inner::forward(p, x, y, sv, m, cols);
        kernels::add_to(y, x, F * cols.C * m);
    }
    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* sv, T* scr, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        if (!xbar) return inner::pullback(p, g, x, sv, scr + F * N, ybar, static_cast<T*>(nullptr), m, cols);
        std::copy_n(ybar, F * N, scr);
        inner::pullback(p, g, x, sv, scr + F * N, scr, xbar, m, cols);
        kernels::add_to(xbar, static_cast<const T*>(ybar), F * N);
    }
};

// The R-operator (derivatives/hvp.hpp): Ry = Rx + R f; xbar = ybar + J^T ybar (and R alike), the inner chain pulling
// back copies of ybar and R ybar. Scratch: those copies, then the inner scratch.
template <class B>
struct ResidualHvpRule {
    using layer = B;
    using inner = hvp_rule_of<typename B::inner>;
    static constexpr bool available = rule_available<inner>();
    static constexpr std::size_t F = B::in_size;
    static constexpr std::size_t saved = inner::saved, scratch = 2 * F + inner::scratch;
    template <class T>
    static void forward(const T* p, const T* v, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        inner::forward(p, v, x, rx, y, ry, sv, m);
        kernels::add_to(y, x, F * m);
        if (rx) kernels::add_to(ry, rx, F * m);
    }
    template <class T>
    static void pullback(const T* p, const T* v, T* g, T* hv, const T* x, const T* rx, const T* sv, T* scr, T* ybar,
                         T* rybar, T* xbar, T* rxbar, std::size_t m) {
        if (!xbar) return inner::pullback(p, v, g, hv, x, rx, sv, scr + 2 * F * m, ybar, rybar, xbar, rxbar, m);
        std::copy_n(ybar, F * m, scr);
        std::copy_n(rybar, F * m, scr + F * m);
        inner::pullback(p, v, g, hv, x, rx, sv, scr + 2 * F * m, scr, scr + F * m, xbar, rxbar, m);
        kernels::add_to(xbar, static_cast<const T*>(ybar), F * m);
        kernels::add_to(rxbar, static_cast<const T*>(rybar), F * m);
    }
};

}  // namespace detail

}  // namespace chainlet
