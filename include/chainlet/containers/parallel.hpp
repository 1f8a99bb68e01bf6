// Parallel<Combine, Branch<Layers...>...>: every branch (a chain of layers) reads the same input; their
// outputs o_1 .. o_B are combined into y by
//   Concat   y = [o_1; o_2; ...]        (flat branch outputs, any widths)
//   Sum      y = o_1 + o_2 + ...        (outputs of one shape)
//   Product  y = o_1 .* o_2 .* ...      (elementwise; outputs of one shape)
//   Dot      y = sum_k prod_b o_b[k]    (one value: the DeepONet combination of branch and trunk net)
// Branches that should read different parts of the input start with a Slice (layers/slice.hpp).
//
// Pullback: branch b receives the cotangent
//   Concat   dy restricted to its block;   Sum  dy;
//   Product  dy .* prod_{j != b} o_j;      Dot  dy[s] prod_{j != b} o_j[k]
// and the input cotangents of the branches add up: dx = sum_b J_b^T dy_b (the first branch writes dx,
// the others write a scratch buffer that is added to it).
//
// PyTorch: `Parallel(combine, *branches)` in python/chainlet_torch.py, the branches an nn.ModuleList of
// nn.Sequential; tensor names read "<index>.branches.<b>.<inner index>.weight".
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "chainlet/chain.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"

namespace chainlet {

// One branch of a Parallel: a chain of layers.
template <class... Layers>
struct Branch {
    template <class InShape>
    using bound = detail::Sequence<InShape, Layers...>;
};
// An empty branch binds to the stand-in chain (chain.hpp), whose members Parallel reads without further
// errors, and rejects its shape: the assertion is the only error (one in Branch's class body was followed
// by up to 6 more with clang, from the members Parallel then could not read).
template <>
struct Branch<> {
    template <class InShape>
    struct bound : detail::stand_in_sequence {
        static constexpr bool rejects_shape = [] {
            static_assert(detail::always_false<InShape>, "Branch<Layers...> needs at least one layer");
            return true;
        }();
    };
};

struct Concat {
    static constexpr const char* name = "concat";
};
struct Sum {
    static constexpr const char* name = "sum";
};
struct Product {
    static constexpr const char* name = "product";
};
struct Dot {
    static constexpr const char* name = "dot";
};

template <class Combine, class... Branches>
struct Parallel {
    static constexpr bool known_combine = std::is_same_v<Combine, Concat> || std::is_same_v<Combine, Sum> ||
                                          std::is_same_v<Combine, Product> || std::is_same_v<Combine, Dot>;

    template <class InShape>
    struct bound {
        static constexpr std::size_t B = sizeof...(Branches);
        using layer_type = Parallel;  // for passes with their own rules (derivatives/taylor.hpp)
        using branches = std::tuple<typename Branches::template bound<InShape>...>;
        template <std::size_t I>
        using branch = std::tuple_element_t<I, branches>;

        static constexpr std::array<std::size_t, B> width = {Branches::template bound<InShape>::out_size...};
        static constexpr bool concat = std::is_same_v<Combine, Concat>;
        static constexpr bool dot = std::is_same_v<Combine, Dot>;
        // (layer.hpp) A branch that rejected its shape has said why: then nothing more is asserted.
        static constexpr bool rejects_shape = [] {
            static_assert(known_combine, "Parallel<Combine, Branches...>: Combine must be Concat, Sum, Product or Dot");
            if constexpr (!known_combine ||
                          (detail::rejects_its_shape<typename Branches::template bound<InShape>>() || ...)) {
                return true;
            } else {
                constexpr bool flat = ((Branches::template bound<InShape>::out_shape::rank == 1) && ...);
                constexpr bool same = (std::is_same_v<typename branch<0>::out_shape,
                                                      typename Branches::template bound<InShape>::out_shape> &&
                                       ...);
                static_assert(!concat || flat, "Parallel<Concat, ...>: every branch must end in a flat output (add Flatten)");
                static_assert(concat || same,
                              "Parallel<Sum/Product/Dot, ...>: every branch must give an output of the same shape");
                static_assert(!dot || B >= 2, "Parallel<Dot, ...> needs at least two branches");
                return (concat && !flat) || (!concat && !same) || (dot && B < 2);
            }
        }();

        static constexpr auto prefix(std::array<std::size_t, B> a) {
            std::array<std::size_t, B + 1> r{};
            for (std::size_t i = 0; i < B; ++i) r[i + 1] = r[i] + a[i];
            return r;
        }
        static constexpr auto param_offset = prefix({Branches::template bound<InShape>::num_params...});
        // Where branch b's output starts: in y for Concat, in saved otherwise.
        static constexpr auto out_offset = prefix(width);
        static constexpr std::size_t in_size = InShape::size;
        static constexpr std::size_t out_size = concat ? out_offset[B] : dot ? 1 : width[0];
        using out_shape = std::conditional_t<concat || dot, Shape<out_size>, typename branch<0>::out_shape>;
        static constexpr std::size_t num_params = param_offset[B];

        // Saved: the branch outputs (not for Concat: they are y), then each branch's saved storage.
        static constexpr std::size_t outputs_saved = concat ? 0 : out_offset[B];
        static constexpr auto saved_offset = [] {
            std::array<std::size_t, B + 1> o{};
            o[0] = outputs_saved;
            const std::array<std::size_t, B> s = {Branches::template bound<InShape>::saved_per_sample...};
            for (std::size_t i = 0; i < B; ++i) o[i + 1] = o[i] + s[i];
            return o;
        }();
        static constexpr std::size_t saved_per_sample = saved_offset[B];
        // Scratch: a branch's output cotangent, an input cotangent to add into dx, the largest branch scratch.
        static constexpr std::size_t cotangent_size = concat ? 0 : *std::max_element(width.begin(), width.end());
        static constexpr std::size_t dx_size = B > 1 ? in_size : 0;
        static constexpr std::size_t scratch_per_sample =
            cotangent_size + dx_size + std::max({Branches::template bound<InShape>::scratch_per_sample...});

        template <class T>
        static void init(std::span<T> p, Rng& rng, InitKind kind) {
            [&]<std::size_t... I>(std::index_sequence<I...>) {
                (branch<I>::init(p.subspan(param_offset[I], param_offset[I + 1] - param_offset[I]), rng, kind), ...);
            }(std::make_index_sequence<B>{});
        }

        template <std::size_t I, class T>
        static T* output(T* y, T* saved, std::size_t n) {
            return (concat ? y : saved) + out_offset[I] * n;
        }

        template <class T>
        static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n, const Pass& pass) {
            [&]<std::size_t... I>(std::index_sequence<I...>) {
                (branch<I>::forward(p + param_offset[I], x, output<I>(y, saved, n), saved + saved_offset[I] * n, n,
                                    substream(pass, I)),
                 ...);
            }(std::make_index_sequence<B>{});
            const std::size_t m = width[0] * n;
            if constexpr (concat) {
                // the branches wrote their blocks of y
            } else if constexpr (std::is_same_v<Combine, Sum>) {
                std::copy_n(saved, m, y);
                for (std::size_t b = 1; b < B; ++b) kernels::add_to(y, saved + out_offset[b] * n, m);
            } else if constexpr (std::is_same_v<Combine, Product>) {
                product_except(saved, B, y, n);
            } else {  // Dot: y[s] = sum_k prod_b o_b[k, s]
                std::fill_n(y, n, T(0));
                for (std::size_t k = 0; k < width[0]; ++k)
                    for (std::size_t s = 0; s < n; ++s) {
                        T v = saved[k * n + s];
                        for (std::size_t b = 1; b < B; ++b) v *= saved[out_offset[b] * n + k * n + s];
                        y[s] += v;
                    }
            }
        }

        // out = prod_{j != skip} o_j elementwise (all branches when skip == B), over width[0] * n values.
        template <class T>
        static void product_except(const T* outputs, std::size_t skip, T* out, std::size_t n) {
            const std::size_t m = width[0] * n;
            std::fill_n(out, m, T(1));
            for (std::size_t j = 0; j < B; ++j)
                if (j != skip)
                    for (std::size_t i = 0; i < m; ++i) out[i] *= outputs[out_offset[j] * n + i];
        }

        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                             std::size_t n) {
            T* const cotangent = scratch;
            T* const branch_dx = scratch + cotangent_size * n;
            T* const branch_scratch = branch_dx + dx_size * n;
            [&]<std::size_t... I>(std::index_sequence<I...>) {
                (([&] {
                     T* dyb = cotangent;
                     const std::size_t m = width[I] * n;
                     if constexpr (concat) {
                         dyb = dy + out_offset[I] * n;
                     } else if constexpr (std::is_same_v<Combine, Sum>) {
                         std::copy_n(dy, m, dyb);
                     } else if constexpr (std::is_same_v<Combine, Product>) {
                         product_except(static_cast<const T*>(saved), I, dyb, n);
                         for (std::size_t i = 0; i < m; ++i) dyb[i] *= dy[i];
                     } else {
                         product_except(static_cast<const T*>(saved), I, dyb, n);
                         for (std::size_t k = 0; k < width[0]; ++k)
                             for (std::size_t s = 0; s < n; ++s) dyb[k * n + s] *= dy[s];
                     }
                     T* dxb = !dx ? nullptr : I == 0 ? dx : branch_dx;
                     branch<I>::pullback(p + param_offset[I], g + param_offset[I], x,
                                         output<I>(const_cast<T*>(y), saved, n), saved + saved_offset[I] * n,
                                         branch_scratch, dyb, dxb, n);
                     if (dx && I > 0) kernels::add_to(dx, static_cast<const T*>(branch_dx), in_size * n);
                 }()),
                 ...);
            }(std::make_index_sequence<B>{});
        }

        static std::string describe() {
            std::string s = std::string("Parallel[") + Combine::name + "]{";
            [&]<std::size_t... I>(std::index_sequence<I...>) {
                ((s.append(I ? " | " : "").append(branch<I>::describe())), ...);
            }(std::make_index_sequence<B>{});
            return s + "}";
        }
        static void torch_layout(TorchModules& m, std::size_t offset) {
            if (!m.natural())
                throw std::invalid_argument(
                    "Parallel right after a Flatten of an image: PyTorch flattens (C, H, W), chainlet (H, W, C); put "
                    "a Dense layer before the Parallel");
            const std::string name = m.next_module();
            [&]<std::size_t... I>(std::index_sequence<I...>) {
                (m.nested(name + ".branches." + std::to_string(I),
                          [&] {
                              branch<I>::torch_layout(m, offset + param_offset[I]);
                              m.natural_order();  // the next branch reads the same (natural-order) input
                          }),
                 ...);
            }(std::make_index_sequence<B>{});
            m.natural_order();
        }
    };
};

// No branch: a bound layer that only rejects its shape, so that the assertion is the only error (one in
// Parallel's class body was followed by 4 more from the members of an empty Parallel).
template <class Combine>
struct Parallel<Combine> {
    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(detail::always_false<InShape>,
                          "Parallel<Combine, Branches...> needs at least one Branch<...> after its Combine (Concat, Sum, "
                          "Product or Dot)");
            return true;
        }();
    };
};

}  // namespace chainlet
