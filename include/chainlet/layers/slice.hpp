// Slice<First, Count>: features First .. First + Count - 1 of a flat input, so that the branches of a
// Parallel can read different parts of one input (a DeepONet's branch net reads the sensor values, its
// trunk net the coordinates). No parameters.
//
// Pullback: dx = dy on the slice and 0 elsewhere. The derivative passes' rules (layer.hpp) do the same
// on every column, below the layer.
//
// PyTorch: `Slice(first, count)` in python/chainlet_torch.py (x[:, first:first + count]); no tensors.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "chainlet/jet.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

namespace detail {
template <std::size_t First, std::size_t Count, class B>
struct SliceJetRule;
template <std::size_t First, std::size_t Count, class B>
struct SliceHvpRule;
}  // namespace detail

template <std::size_t First, std::size_t Count>
struct Slice {
    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(Count > 0, "Slice<First, Count>: Count must be positive");
            static_assert(Count == 0 || InShape::rank == 1, "Slice needs a flat input: put chainlet::Flatten before it");
            static_assert(Count == 0 || InShape::rank != 1 || First + Count <= InShape::size,
                          "Slice<First, Count>: the slice runs past the end of the input");
            return Count == 0 || InShape::rank != 1 || First + Count > InShape::size;
        }();
        static constexpr std::size_t in_size = InShape::size, out_size = Count;
        using layer_type = Slice;
        using jet_rule = detail::SliceJetRule<First, Count, bound>;  // the derivative passes' rules (below)
        using hvp_rule = detail::SliceHvpRule<First, Count, bound>;
        using out_shape = Shape<Count>;
        static constexpr std::size_t num_params = 0, saved_per_sample = 0, scratch_per_sample = 0;

        template <class T>
        static void init(std::span<T>, Rng&, InitKind) {}
        template <class T>
        static void forward(const T*, const T* x, T* y, T*, std::size_t n) {
            std::copy_n(x + First * n, Count * n, y);  // feature-major: the slice is one block
        }
        template <class T>
        static void pullback(const T*, T*, const T*, const T*, T*, T*, T* dy, T* dx, std::size_t n) {
            if (!dx) return;
            std::fill_n(dx, First * n, T(0));
            std::copy_n(dy, Count * n, dx + First * n);
            std::fill(dx + (First + Count) * n, dx + in_size * n, T(0));
        }

        static std::string describe() { return "Slice[" + std::to_string(First) + "," + std::to_string(Count) + "]"; }
        static void torch_layout(TorchModules& m, std::size_t) {
            if (!m.natural())
                throw std::invalid_argument(
                    "Slice right after a Flatten of an image: PyTorch flattens (C, H, W), chainlet (H, W, C), so the "
                    "slice would select other features in PyTorch");
            m.skip_module();
        }
    };
};

namespace detail {

// Input derivatives (jet.hpp): every column selects features First .. First + Count - 1 (one block, as the
// columns sit inside a feature). Pullback: ybar scattered into those features of xbar, 0 elsewhere.
template <std::size_t First, std::size_t Count, class B>
struct SliceJetRule {
    using layer = B;
    static constexpr std::size_t saved = 0, scratch = 0;
    template <class T>
    static void forward(const T*, const T* x, T* y, T*, std::size_t m, const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        std::copy_n(x + First * N, Count * N, y);
    }
    template <class T>
    static void pullback(const T*, T*, const T*, const T*, T*, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        if (!xbar) return;
        const std::size_t N = cols.C * m;
        std::fill_n(xbar, First * N, T(0));
        std::copy_n(ybar, Count * N, xbar + First * N);
        std::fill(xbar + (First + Count) * N, xbar + B::in_size * N, T(0));
    }
};

// The R-operator (derivatives/hvp.hpp): y and Ry select (Rx = 0: Ry = 0); xbar and R xbar scatter.
template <std::size_t First, std::size_t Count, class B>
struct SliceHvpRule {
    using layer = B;
    static constexpr std::size_t saved = 0, scratch = 0;
    template <class T>
    static void forward(const T*, const T*, const T* x, const T* rx, T* y, T* ry, T*, std::size_t m) {
        std::copy_n(x + First * m, Count * m, y);
        if (rx) std::copy_n(rx + First * m, Count * m, ry);
        else std::fill_n(ry, Count * m, T(0));
    }
    template <class T>
    static void pullback(const T*, const T*, T*, T*, const T*, const T*, const T*, T*, T* ybar, T* rybar, T* xbar,
                         T* rxbar, std::size_t m) {
        if (!xbar) return;
        for (auto [out, in] : {std::pair{xbar, ybar}, std::pair{rxbar, rybar}}) {
            std::fill_n(out, First * m, T(0));
            std::copy_n(in, Count * m, out + First * m);
            std::fill(out + (First + Count) * m, out + B::in_size * m, T(0));
        }
    }
};

}  // namespace detail

}  // namespace chainlet
