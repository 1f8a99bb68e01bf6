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
// the others write a scratch buffer that is added to it). The derivative passes' rules (layer.hpp), below
// the layer.
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
#include "chainlet/jet.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/kernels/vector_loop.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"

namespace chainlet {

namespace detail {
template <class B>
struct ParallelJetRule;
template <class B>
struct ParallelHvpRule;
}  // namespace detail

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
        using layer_type = Parallel;
        using combine = Combine;
        using jet_rule = detail::ParallelJetRule<bound>;  // the derivative passes' rules (below)
        using hvp_rule = detail::ParallelHvpRule<bound>;
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
        // Fixed parameters (layer.hpp): the branches' own, at their offsets.
        static constexpr std::size_t num_fixed_params = detail::parts_fixed_params<branches>::count;
        static constexpr bool fixed_param(std::size_t i) { return detail::parts_fixed_params<branches>::at(param_offset, i); }

        // Saved: the branch outputs (not for Concat: they are y), then each branch's saved storage.
        static constexpr std::size_t outputs_saved = concat ? 0 : out_offset[B];
        static constexpr auto saved_offset =
            detail::blocks_after<B>(outputs_saved, {Branches::template bound<InShape>::saved_per_sample...});
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

namespace detail {

// The product of two jets (one feature, C x m values each), Leibniz:
//   y = a b,   y_i = a_i b + a b_i,   y_S = a_S b + 2 sum_{i in S} a_i b_i + a b_S.
// Accumulate: y += instead of y = (Dot sums the features' products).
template <bool Accumulate, class T>
void jet_product(const T* a, const T* b, T* y, std::size_t m, const JetColumns& cols) {
    const std::size_t D = cols.D, K = cols.second.size();
    kernels::vectors_then_scalars<T>(m, [&]<class V>(std::size_t s) {
        auto ld = [&](const T* q, std::size_t c) { return simd::loadv<V>(q + c * m + s); };
        auto put = [&](std::size_t c, V v) {
            if constexpr (Accumulate) v += simd::loadv<V>(y + c * m + s);
            simd::storev(y + c * m + s, v);
        };
        const V a0 = ld(a, 0), b0 = ld(b, 0);
        for (std::size_t k = 0; k < K; ++k) {
            V cross(0);
            for (auto i : cols.second[k]) cross = simd::fma(ld(a, 1 + i), ld(b, 1 + i), cross);
            const std::size_t c = 1 + D + k;
            put(c, simd::fma(ld(a, c), b0, simd::fma(a0, ld(b, c), V(2) * cross)));
        }
        for (std::size_t i = 0; i < D; ++i) put(1 + i, simd::fma(ld(a, 1 + i), b0, a0 * ld(b, 1 + i)));
        put(0, a0 * b0);
    });
}

// The pullback of jet_product to a (to b: swap a and b), from the cotangent ybar of y:
//   abar   = sum over every column c of ybar_c b_c     (a enters y_c with the factor b_c)
//   abar_i = ybar_i b + 2 b_i sum_{S contains i} ybar_S
//   abar_S = ybar_S b
template <class T>
void jet_product_pullback(const T* b, const T* ybar, T* abar, std::size_t m, const JetColumns& cols) {
    const std::size_t D = cols.D, K = cols.second.size(), C = cols.C;
    kernels::vectors_then_scalars<T>(m, [&]<class V>(std::size_t s) {
        auto ld = [&](const T* q, std::size_t c) { return simd::loadv<V>(q + c * m + s); };
        const V b0 = ld(b, 0);
        V a0(0);
        for (std::size_t c = 0; c < C; ++c) a0 = simd::fma(ld(ybar, c), ld(b, c), a0);
        for (std::size_t i = 0; i < D; ++i) {
            V w(0);
            for (auto k : cols.containing[i]) w += ld(ybar, 1 + D + k);
            simd::storev(abar + (1 + i) * m + s, simd::fma(ld(ybar, 1 + i), b0, V(2) * w * ld(b, 1 + i)));
        }
        for (std::size_t k = 0; k < K; ++k) simd::storev(abar + (1 + D + k) * m + s, ld(ybar, 1 + D + k) * b0);
        simd::storev(abar + s, a0);
    });
}

// Input derivatives (jet.hpp): every branch reads x's columns. Concat: the branches' columns side by
// side (each branch writes its block of y). Sum: y_c = sum_b o_b,c. Product: the jet products, one factor
// after the other, P_0 = o_0, P_b = jet_product(P_{b-1}, o_b), y = P_{B-1}, per feature. Dot: the same,
// with the last product summed over the features.
// Pullback: branch b's cotangent is ybar's block (Concat) or a copy of ybar (Sum). Product and Dot go
// backwards through the products, Pbar_{B-1} = ybar (Dot: the one ybar for every feature), then for
// b = B-1 .. 1:  obar_b = jet_product_pullback(P_{b-1}, Pbar_b),  Pbar_{b-1} = jet_product_pullback(o_b,
// Pbar_b); and obar_0 = Pbar_0. Each branch is pulled back as soon as its cotangent is known (last
// branch first). The branches' input cotangents add up (the first pulled back writes xbar, the others
// a scratch block added to it).
// Saved: the branch outputs (not for Concat), the partial products P_1 .. P_{B-2} (Product, Dot), then
// each branch's saved block. Scratch: a branch's cotangent (not for Concat), two Pbar buffers (Product,
// Dot), the input cotangent of a later branch, the largest branch scratch.
// What the two rules below share: how the branches combine and the branches' own rules (RuleOf: jet.hpp's
// jet_rule_of or hvp_rule_of).
template <class B, template <class> class RuleOf>
struct ParallelRuleShape {
    using layer = B;
    using Combine = typename B::combine;
    static constexpr std::size_t NB = std::tuple_size_v<typename B::branches>;
    static constexpr bool concat = std::is_same_v<Combine, Concat>, dot = std::is_same_v<Combine, Dot>;
    // A Product of one branch is its output, as a Sum of one.
    static constexpr bool additive = std::is_same_v<Combine, Sum> || (std::is_same_v<Combine, Product> && NB == 1);
    static constexpr bool products = !concat && !additive;
    static constexpr std::size_t Fo = B::width[0];  // the branch width (Sum, Product, Dot)
    static constexpr std::size_t num_partials = products ? NB - 2 : 0;  // P_1 .. P_{B-2}
    template <std::size_t I>
    using rule = RuleOf<typename B::template branch<I>>;
    static constexpr bool available = []<std::size_t... I>(std::index_sequence<I...>) {
        return (rule_available<rule<I>>() && ...);
    }(std::make_index_sequence<NB>{});
};

template <class B>
struct ParallelJetRule : ParallelRuleShape<B, jet_rule_of> {
    using Shape = ParallelRuleShape<B, jet_rule_of>;
    using typename Shape::layer;
    // (Copies, not using-declarations: g++ 12 does not find those inside the generic lambdas below.)
    static constexpr std::size_t NB = Shape::NB, Fo = Shape::Fo, num_partials = Shape::num_partials;
    static constexpr bool concat = Shape::concat, dot = Shape::dot, additive = Shape::additive, products = Shape::products;
    template <std::size_t I>
    using rule = typename Shape::template rule<I>;
    static constexpr std::size_t partials_offset = concat ? 0 : B::out_offset[NB];
    static constexpr std::size_t outputs_saved = partials_offset + num_partials * Fo;
    static constexpr std::array<std::size_t, NB + 1> saved_offset = []<std::size_t... I>(std::index_sequence<I...>) {
        return blocks_after<NB>(outputs_saved, {rule<I>::saved...});
    }(std::make_index_sequence<NB>{});
    static constexpr std::size_t saved = saved_offset[NB];
    static constexpr std::size_t cotangent_size = concat ? 0 : products ? 3 * Fo : Fo;
    static constexpr std::size_t dx_size = NB > 1 ? B::in_size : 0;
    static constexpr std::size_t scratch = []<std::size_t... I>(std::index_sequence<I...>) {
        return cotangent_size + dx_size + std::max({rule<I>::scratch...});
    }(std::make_index_sequence<NB>{});

    template <std::size_t I, class T>
    static T* output(T* y, T* sv, std::size_t N) {
        return (concat ? y : sv) + B::out_offset[I] * N;
    }
    // P_b (P_0 = o_0).
    template <class T>
    static T* partial(T* sv, std::size_t b, std::size_t N) {
        return b == 0 ? sv : sv + (partials_offset + (b - 1) * Fo) * N;
    }

    template <class T>
    static void forward(const T* p, const T* x, T* y, T* sv, std::size_t m, const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (rule<I>::forward(p + B::param_offset[I], x, output<I>(y, sv, N), sv + saved_offset[I] * N, m, cols), ...);
        }(std::make_index_sequence<NB>{});
        if constexpr (concat) {
            // the branches wrote their blocks of y
        } else if constexpr (additive) {
            std::copy_n(sv, Fo * N, y);
            for (std::size_t b = 1; b < NB; ++b) kernels::add_to(y, static_cast<const T*>(sv + B::out_offset[b] * N), Fo * N);
        } else {
            for (std::size_t b = 1; b < NB; ++b) {
                const T* left = partial(sv, b - 1, N);
                const T* right = sv + B::out_offset[b] * N;
                if (b + 1 < NB || !dot) {
                    T* dest = b + 1 < NB ? partial(sv, b, N) : y;
                    for (std::size_t k = 0; k < Fo; ++k) jet_product<false>(left + k * N, right + k * N, dest + k * N, m, cols);
                } else {
                    std::fill_n(y, N, T(0));
                    for (std::size_t k = 0; k < Fo; ++k) jet_product<true>(left + k * N, right + k * N, y, m, cols);
                }
            }
        }
    }

    template <class T>
    static void pullback(const T* p, T* g, const T* x, const T* sv, T* scr, T* ybar, T* xbar, std::size_t m,
                         const JetColumns& cols) {
        const std::size_t N = cols.C * m;
        T* const cotangent = scr;
        T* const pbar_buf[2] = {scr + Fo * N, scr + 2 * Fo * N};  // Product, Dot
        T* const branch_dx = scr + cotangent_size * N;
        T* const branch_scratch = branch_dx + dx_size * N;
        T* const sv_mut = const_cast<T*>(sv);  // read only
        [&]<std::size_t... R>(std::index_sequence<R...>) {
            (([&] {
                 constexpr std::size_t I = products ? NB - 1 - R : R;  // products: last branch first
                 T* dyb = cotangent;
                 if constexpr (concat) {
                     dyb = ybar + B::out_offset[I] * N;
                 } else if constexpr (additive) {
                     std::copy_n(ybar, Fo * N, dyb);
                 } else {
                     // Pbar_I: ybar (for Dot one feature, read for every k), or the buffer the step above wrote
                     const T* pbar = I == NB - 1 ? ybar : pbar_buf[I % 2];
                     const std::size_t stride = I == NB - 1 && dot ? 0 : N;
                     if constexpr (I >= 1) {
                         const T* left = partial(sv_mut, I - 1, N);
                         const T* own = sv + B::out_offset[I] * N;
                         T* next = pbar_buf[(I - 1) % 2];
                         for (std::size_t k = 0; k < Fo; ++k) {
                             jet_product_pullback(left + k * N, pbar + k * stride, dyb + k * N, m, cols);
                             jet_product_pullback(own + k * N, pbar + k * stride, next + k * N, m, cols);
                         }
                     } else {
                         dyb = pbar_buf[0];  // obar_0 = Pbar_0
                     }
                 }
                 T* dxb = !xbar ? nullptr : R == 0 ? xbar : branch_dx;
                 rule<I>::pullback(p + B::param_offset[I], g + B::param_offset[I], x, sv + saved_offset[I] * N,
                                   branch_scratch, dyb, dxb, m, cols);
                 if (xbar && R > 0) kernels::add_to(xbar, static_cast<const T*>(branch_dx), B::in_size * N);
             }()),
             ...);
        }(std::make_index_sequence<NB>{});
    }
};

// The R-operator (derivatives/hvp.hpp): as the jet rule above, with R (a product y = A B, one factor
// at a time: Ry = RA B + A RB;  Abar = ybar B,  R Abar = R ybar B + ybar RB, and B alike). Saved: the branch outputs o_b, then their R o_b (not for
// Concat), the partial products P_1 .. P_{B-2} and their R (Product, Dot), the branches' saved blocks.
// Scratch: a branch's cotangent and its R (not for Concat), two Pbar buffers and their R (Product, Dot),
// a later branch's input cotangent and its R, the largest branch scratch.
template <class B>
struct ParallelHvpRule : ParallelRuleShape<B, hvp_rule_of> {
    using Shape = ParallelRuleShape<B, hvp_rule_of>;
    using typename Shape::layer;
    static constexpr std::size_t NB = Shape::NB, Fo = Shape::Fo, num_partials = Shape::num_partials;
    static constexpr bool concat = Shape::concat, dot = Shape::dot, additive = Shape::additive, products = Shape::products;
    template <std::size_t I>
    using rule = typename Shape::template rule<I>;
    static constexpr std::size_t Wsum = B::out_offset[NB];  // all branch outputs
    static constexpr std::size_t partials_offset = concat ? 0 : 2 * Wsum;
    static constexpr std::array<std::size_t, NB + 1> saved_offset = []<std::size_t... I>(std::index_sequence<I...>) {
        return blocks_after<NB>(partials_offset + 2 * num_partials * Fo, {rule<I>::saved...});
    }(std::make_index_sequence<NB>{});
    static constexpr std::size_t saved = saved_offset[NB];
    static constexpr std::size_t cotangent_size = concat ? 0 : products ? 6 * Fo : 2 * Fo;
    static constexpr std::size_t dx_size = NB > 1 ? 2 * B::in_size : 0;
    static constexpr std::size_t scratch = []<std::size_t... I>(std::index_sequence<I...>) {
        return cotangent_size + dx_size + std::max({rule<I>::scratch...});
    }(std::make_index_sequence<NB>{});

    // Branch b's output and its R (in y, ry for Concat).
    template <std::size_t I, class T>
    static T* out(T* y, T* sv, std::size_t m) {
        return concat ? y + B::out_offset[I] * m : sv + B::out_offset[I] * m;
    }
    template <std::size_t I, class T>
    static T* rout(T* ry, T* sv, std::size_t m) {
        return concat ? ry + B::out_offset[I] * m : sv + (Wsum + B::out_offset[I]) * m;
    }
    // P_b and R P_b (P_0 = o_0).
    template <class T>
    static T* partial(T* sv, std::size_t b, std::size_t m) {
        return b == 0 ? sv : sv + (partials_offset + 2 * (b - 1) * Fo) * m;
    }
    template <class T>
    static T* rpartial(T* sv, std::size_t b, std::size_t m) {
        return b == 0 ? sv + Wsum * m : sv + (partials_offset + (2 * (b - 1) + 1) * Fo) * m;
    }

    template <class T>
    static void forward(const T* p, const T* v, const T* x, const T* rx, T* y, T* ry, T* sv, std::size_t m) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (rule<I>::forward(p + B::param_offset[I], v + B::param_offset[I], x, rx, out<I>(y, sv, m), rout<I>(ry, sv, m),
                              sv + saved_offset[I] * m, m),
             ...);
        }(std::make_index_sequence<NB>{});
        const std::size_t len = Fo * m;
        if constexpr (concat) {
        } else if constexpr (additive) {
            std::copy_n(sv, len, y);
            std::copy_n(sv + Wsum * m, len, ry);
            for (std::size_t b = 1; b < NB; ++b) {
                kernels::add_to(y, static_cast<const T*>(sv + B::out_offset[b] * m), len);
                kernels::add_to(ry, static_cast<const T*>(sv + (Wsum + B::out_offset[b]) * m), len);
            }
        } else {
            if constexpr (dot) {
                std::fill_n(y, m, T(0));
                std::fill_n(ry, m, T(0));
            }
            for (std::size_t b = 1; b < NB; ++b) {
                const T *A = partial(sv, b - 1, m), *RA = rpartial(sv, b - 1, m);
                const T *Bo = sv + B::out_offset[b] * m, *RB = sv + (Wsum + B::out_offset[b]) * m;
                const bool last = b + 1 == NB;
                if (last && dot) {
                    for (std::size_t k = 0; k < Fo; ++k)
                        for (std::size_t s = 0; s < m; ++s) {
                            const std::size_t i = k * m + s;
                            y[s] += A[i] * Bo[i];
                            ry[s] += RA[i] * Bo[i] + A[i] * RB[i];
                        }
                } else {
                    T* P = last ? y : partial(sv, b, m);
                    T* RP = last ? ry : rpartial(sv, b, m);
                    for (std::size_t i = 0; i < len; ++i) {
                        const T a = A[i], ra = RA[i];  // P may not alias A, but read first anyway
                        P[i] = a * Bo[i];
                        RP[i] = ra * Bo[i] + a * RB[i];
                    }
                }
            }
        }
    }

    template <class T>
    static void pullback(const T* p, const T* v, T* g, T* hv, const T* x, const T* rx, const T* sv, T* scr, T* ybar,
                         T* rybar, T* xbar, T* rxbar, std::size_t m) {
        const std::size_t len = Fo * m;
        T* const c = scr;  // a branch's cotangent, then its R
        T* const pb[2] = {scr + 2 * len, scr + 4 * len};  // Pbar and R Pbar, ping-pong (Product, Dot)
        T* const bdx = scr + cotangent_size * m;
        T* const bscr = bdx + dx_size * m;
        T* const svm = const_cast<T*>(sv);  // read only
        [&]<std::size_t... R>(std::index_sequence<R...>) {
            (([&] {
                 constexpr std::size_t I = products ? NB - 1 - R : R;
                 T *dyb = c, *rdyb = c + len;
                 if constexpr (concat) {
                     dyb = ybar + B::out_offset[I] * m;
                     rdyb = rybar + B::out_offset[I] * m;
                 } else if constexpr (additive) {
                     std::copy_n(ybar, len, dyb);
                     std::copy_n(rybar, len, rdyb);
                 } else {
                     // Pbar_I and its R: ybar, rybar (Dot: one feature for every k) or the buffers written above
                     const T* Pb = I == NB - 1 ? ybar : pb[I % 2];
                     const T* RPb = I == NB - 1 ? rybar : pb[I % 2] + len;
                     const bool bcast = I == NB - 1 && dot;
                     if constexpr (I >= 1) {
                         const T *A = partial(svm, I - 1, m), *RA = rpartial(svm, I - 1, m);
                         const T *Bo = sv + B::out_offset[I] * m, *RB = sv + (Wsum + B::out_offset[I]) * m;
                         T *Ab = pb[(I - 1) % 2], *RAb = pb[(I - 1) % 2] + len;
                         for (std::size_t i = 0; i < len; ++i) {
                             const std::size_t j = bcast ? i % m : i;
                             dyb[i] = Pb[j] * A[i];                      // Bbar = Pbar A
                             rdyb[i] = RPb[j] * A[i] + Pb[j] * RA[i];    // R Bbar = R Pbar A + Pbar RA
                             Ab[i] = Pb[j] * Bo[i];                      // Abar = Pbar B
                             RAb[i] = RPb[j] * Bo[i] + Pb[j] * RB[i];    // R Abar = R Pbar B + Pbar RB
                         }
                     } else {
                         dyb = pb[0];
                         rdyb = pb[0] + len;
                     }
                 }
                 T* dxb = !xbar ? nullptr : R == 0 ? xbar : bdx;
                 T* rdxb = !xbar ? nullptr : R == 0 ? rxbar : bdx + B::in_size * m;
                 rule<I>::pullback(p + B::param_offset[I], v + B::param_offset[I], g + B::param_offset[I],
                                   hv + B::param_offset[I], x, rx, sv + saved_offset[I] * m, bscr, dyb, rdyb, dxb,
                                   rdxb, m);
                 if (xbar && R > 0) {
                     kernels::add_to(xbar, static_cast<const T*>(bdx), B::in_size * m);
                     kernels::add_to(rxbar, static_cast<const T*>(bdx + B::in_size * m), B::in_size * m);
                 }
             }()),
             ...);
        }(std::make_index_sequence<NB>{});
    }
};

}  // namespace detail

}  // namespace chainlet
