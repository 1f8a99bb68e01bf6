// The user-defined layer of docs/api.md ("Your own layer"), compiled and checked by test_user_layer and
// cross-checked against PyTorch by torch_crosscheck: a per-feature scale and shift, y = a .* x + b.
//
// Pullback: da += sum_s dy .* x,  db += sum_s dy,  dx = a .* dy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"

struct ScaleShift {
    template <class InShape>
    struct bound {
        static constexpr std::size_t in_size = InShape::size, out_size = InShape::size;
        using out_shape = InShape;
        static constexpr std::size_t num_params = 2 * in_size;  // a, then b
        static constexpr std::size_t saved_per_sample = 0, scratch_per_sample = 0;

        template <class T>
        static void init(std::span<T> p, chainlet::Rng&, chainlet::InitKind) {
            std::fill_n(p.begin(), in_size, T(1));
            std::fill(p.begin() + in_size, p.end(), T(0));
        }

        // x, y: feature f of sample s at [f * n + s]
        template <class T>
        static void forward(const T* p, const T* x, T* y, T*, std::size_t n) {
            for (std::size_t f = 0; f < in_size; ++f)
                for (std::size_t s = 0; s < n; ++s) y[f * n + s] = p[f] * x[f * n + s] + p[in_size + f];
        }

        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T*, T*, T*, T* dy, T* dx, std::size_t n) {
            for (std::size_t f = 0; f < in_size; ++f)
                for (std::size_t s = 0; s < n; ++s) {
                    g[f] += dy[f * n + s] * x[f * n + s];  // add into g: it holds earlier chunks' sums
                    g[in_size + f] += dy[f * n + s];
                    if (dx) dx[f * n + s] = p[f] * dy[f * n + s];  // overwrite dx; it may be null
                }
        }

        // Optional metadata: checkpoints name the layer, safetensors give PyTorch's tensors.
        static std::string describe() { return "ScaleShift"; }
        static void torch_layout(chainlet::TorchModules& m, std::size_t offset) {
            const std::string name = m.next_module();  // e.g. "2"
            chainlet::TorchTensor scale{name + ".scale", {in_size}, {}}, shift{name + ".shift", {in_size}, {}};
            for (std::size_t f = 0; f < in_size; ++f) {
                scale.source.push_back(offset + m.input_feature(f));
                shift.source.push_back(offset + in_size + m.input_feature(f));
            }
            m.add(std::move(scale));
            m.add(std::move(shift));
        }
    };
};
