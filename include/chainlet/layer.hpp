// The layer contract: what a type must provide to be a layer of a Chain. This header is the one place
// that states it; Chain checks every layer against it and names what a layer lacks.
//
// A *layer type* L (what a user writes in Chain<Input<...>, L, ...>) is stateless and has a member
// template `L::bound<InShape>`: the layer bound to the shape of one input sample (a chainlet::Shape).
// The bound layer B provides, all static:
//
//   in_size, out_size          features per sample in and out (in_size == InShape::size)
//   out_shape                  the Shape of one output sample
//   num_params                 its slice of the flat parameter buffer
//   saved_per_sample           values per sample that forward writes and pullback reads (the pre-activation,
//                              a padded input, a mask, the activations of an inner chain ...)
//   scratch_per_sample         values per sample pullback may use as scratch (contents undefined on entry)
//   init(std::span<T> p, Rng& rng, InitKind kind)           fills its parameter slice
//   forward(p, x, y, saved, n)                               y = f(p, x) for a chunk of n samples
//   pullback(p, g, x, y, saved, scratch, dy, dx, n)          g += (df/dp)^T dy,  dx = (df/dx)^T dy
//
// for T = float and T = double (templates on T). Pointers: p is the layer's own parameter slice, g the
// matching slice of the gradient buffer; x, y, dx, dy hold a chunk of n samples *feature-major*: feature f
// of sample s at [f * n + s]; saved holds saved_per_sample * n values, scratch scratch_per_sample * n.
//
// The rules the pullback keeps (layer_check.hpp tests each of them):
//   - it *adds* its parameter gradient into g (g holds the sum over earlier chunks and layers);
//   - it *overwrites* dx, and dx may be null (no input gradient wanted, e.g. the first layer);
//   - it may clobber dy, but not x, y or saved: so a pullback may be repeated on one forward with
//     other cotangents (pullback.hpp's pullback() does), and gives the same result each time;
//   - it reads nothing of scratch it did not write in the same call, and forward reads nothing of saved
//     it did not write in the same call;
//   - the samples of a chunk are independent: sample s's outputs depend on its own inputs alone, and
//     its share of g and dx on its own inputs and dy alone, linearly in dy (so a sample with dy = 0
//     adds nothing). The workspaces rely on it: they pad a chunk with copies of a sample whose dy is
//     zero, and run a few samples one at a time. (No batch statistics inside a layer.)
//
// Optional members:
//   forward(p, x, y, saved, n, const Pass& pass)   used instead of the five-argument forward when present:
//                                                  for layers that behave differently in training (Dropout)
//   pullback_assign(p, g, x, y, saved, scratch, dy, dx, n)
//                                                  as pullback, but *writes* its parameter gradient into g,
//                                                  whose contents on entry are undefined (may be NaN); all
//                                                  other rules as for pullback. value_and_gradient uses it
//                                                  wherever a gradient buffer is written first (a batch of
//                                                  one chunk, a group's first chunk), instead of zeroing it
//                                                  and adding: for one sample that is a large part of the time.
//                                                  Without it the chain zeroes the layer's slice and calls
//                                                  pullback.
//   in_shape, cotangent_row_block, cotangent_rows(x, y, dy, dx_rows, r0, r1, n)
//                                                  for a layer on images (in_shape = Shape<H, W, C>) without
//                                                  parameters whose input cotangent can be computed a band of
//                                                  input rows at a time (MaxPool): writes rows [r0, r1) of the
//                                                  dx that pullback writes (input row r: the W * C * n values
//                                                  at r * W * C * n) to dx_rows + (r - r0) * W * C * n. r0 is a
//                                                  multiple of cotangent_row_block, r1 one too or H. Reads x,
//                                                  y and dy only.
//   pullback_from_rows(p, g, x, y, saved, scratch, dy, dx, n, rows, row_block)
//                                                  as pullback, but its output cotangent is not computed yet:
//                                                  rows(r0, r1, out) writes output rows [r0, r1) of it to out
//                                                  (r0 a multiple of row_block, r1 one too or the output
//                                                  height: out_shape = Shape<OH, OW, OC>), and dy is a buffer
//                                                  for all of it (contents undefined on entry). It must ask
//                                                  for every row and give the bits of rows(0, OH, dy)
//                                                  followed by pullback. A chain calls it, in place of the
//                                                  next layer's pullback and this one's, when the next layer
//                                                  has cotangent_rows (a Conv followed by a MaxPool), so the
//                                                  layer can use each band of its cotangent while it is in
//                                                  L1 (layers/conv.hpp).
//   rejects_shape                                  static constexpr bool: true when the layer cannot take
//                                                  InShape (or its template arguments are out of range). Its
//                                                  initializer says why in a static_assert, inside a lambda or
//                                                  a constexpr function, not in the class body (clang marks a
//                                                  class whose own static_assert failed as invalid, and every
//                                                  later use of it fails too):
//                                                    static constexpr bool rejects_shape = [] {
//                                                        static_assert(InShape::rank == 1, "MyLayer needs ...");
//                                                        return InShape::rank != 1;
//                                                    }();
//                                                  A chain reads it before anything else of the bound layer;
//                                                  when it is true, the chain puts a stand-in (broken_layer)
//                                                  in the place of this layer and of every later one,
//                                                  unchecked, so that message is the compiler's only
//                                                  error. The bound layer's other members need not make sense
//                                                  then, but the class must still instantiate: keep extents
//                                                  and divisors positive (e.g. OH = H >= P ? H / P : 1).
//   describe()                                     architecture text for checkpoints, e.g. "Dense[10,relu]"
//   torch_layout(TorchModules& m, std::size_t off) the layer's PyTorch modules and tensors (layer_metadata.hpp)
//   num_fixed_params                               static constexpr std::size_t: the last that many of its
//                                                  num_params entries are fixed values, not trained (random
//                                                  frequencies, a scale): init draws them from its stream (or
//                                                  a user writes them into the buffer), forward and the rules
//                                                  read them, checkpoints and safetensors store them with the
//                                                  rest. Their gradient stays 0: no pullback or rule adds to
//                                                  it, and the R-operator's v counts as 0 there. fit's
//                                                  optimisers then leave them as they are (AdamW's decay skips
//                                                  fixed_param_ranges<Net>(), below). A container counts its
//                                                  layers' and says per entry which are fixed (fixed_param(i)).
// A layer without the last two trains and predicts like any other; saving it to a checkpoint or a
// safetensors file is then a compile error that names the missing member.
//
// Optional member types, the layer's rules in the derivative passes (a layer without them trains as any
// other; a pass over a chain that holds it is one compile error naming it, jet.hpp):
//   jet_rule   input derivatives and residual losses (derivatives/taylor.hpp). Static members:
//                layer                                 the bound layer itself (`using layer = bound;`)
//                saved, scratch                        features of storage per sample, each C x m values
//                forward(p, x, y, saved, m, cols)      y's columns from x's, for a chunk of m samples
//                pullback(p, g, x, saved, scratch, ybar, xbar, m, cols)
//                                                      g += the parameter cotangent, xbar = the input
//                                                      cotangent (may be null); ybar may be clobbered, x
//                                                      and saved not (containers read them after it)
//              x, y, xbar, ybar, saved and scratch hold C columns per feature, [f][c][s] at f C m + c m + s;
//              cols (jet.hpp's JetColumns) gives C, the D tangents and the second-derivative sets. Column
//              0 is the value, 1 .. D the tangents, then the sums of pure second derivatives (jet.hpp).
//   hvp_rule   the parameter Hessian-vector product (derivatives/hvp.hpp, the R-operator R{.} = d/de{.}(p +
//              e v)). Static members:
//                layer, saved, scratch                 as above, features of m values each
//                forward(p, v, x, rx, y, ry, saved, m) y and Ry from x and Rx (rx null: Rx = 0)
//                pullback(p, v, g, hv, x, rx, saved, scratch, ybar, rybar, xbar, rxbar, m)
//                                                      g += the gradient, hv += its R; xbar and rxbar (both
//                                                      null or neither) overwritten; ybar, rybar may be
//                                                      clobbered, x, rx and saved not
// `layer` must be the bound layer: a bound layer derived from another's inherits its member types, and a
// rule that names another layer computes that layer's derivatives, so the passes refuse it (one compile
// error). A rule may also say `static constexpr bool available = false` where the layer's template
// arguments leave it without one (Dense or Conv with an activation without a jet); check_layer then skips it.
// check_layer checks both rules against finite differences (layer_check.hpp).
//   layer_type    the layer type a bound layer belongs to (Dense<...> for Dense<...>::bound<S>), for tools
//                 that describe a chain (tests/pinn_crosscheck.cpp); no pass reads it.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "chainlet/init.hpp"
#include "chainlet/param_range.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

class TorchModules;  // layer_metadata.hpp

// What a forward pass is for. Layers that behave differently in training (Dropout) read it; the rest
// never see it. training: the pass is part of a gradient step (fit, value_and_gradient); seed and step
// identify the step and first_sample the chunk's first sample in the batch, so that random draws can
// be keyed by (seed, step, sample, feature) and give the same bits on any thread count. stream tells
// apart the random layers of one network: a chain gives its layer i the stream substream(stream, i), a
// container its branch b substream(stream, b), so two Dropout layers never draw the same mask.
struct Pass {
    bool training = false;
    std::uint64_t seed = 0;
    std::uint64_t step = 0;
    std::size_t first_sample = 0;
    std::uint64_t stream = 0;
};

// The pass as seen by child i of a chain or container (see Pass::stream).
inline Pass substream(Pass pass, std::size_t i) {
    pass.stream = pass.stream * 0x9E3779B97F4A7C15ull + i + 1;
    return pass;
}

namespace detail {

template <class B>
concept has_layer_sizes = requires {
    { B::in_size } -> std::convertible_to<std::size_t>;
    { B::out_size } -> std::convertible_to<std::size_t>;
    { B::num_params } -> std::convertible_to<std::size_t>;
    { B::saved_per_sample } -> std::convertible_to<std::size_t>;
    { B::scratch_per_sample } -> std::convertible_to<std::size_t>;
};

template <class B>
concept has_out_shape = requires { typename B::out_shape; B::out_shape::size; } && B::out_shape::size == B::out_size;

template <class B, class T>
concept has_init = requires(std::span<T> p, Rng& rng) { B::template init<T>(p, rng, InitKind::glorot_uniform); };

template <class B, class T>
concept has_plain_forward = requires(const T* p, const T* x, T* y, T* saved, std::size_t n) {
    B::template forward<T>(p, x, y, saved, n);
};

template <class B, class T>
concept has_pass_forward = requires(const T* p, const T* x, T* y, T* saved, std::size_t n, const Pass& pass) {
    B::template forward<T>(p, x, y, saved, n, pass);
};

template <class B, class T>
concept has_pullback = requires(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                                std::size_t n) { B::template pullback<T>(p, g, x, y, saved, scratch, dy, dx, n); };

template <class B, class T>
concept has_pullback_assign = requires(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                                       std::size_t n) {
    B::template pullback_assign<T>(p, g, x, y, saved, scratch, dy, dx, n);
};

// The optional band-by-band pullback of two neighbouring layers (see above).
template <class T>
struct RowsProbe {  // stands for the rows callable in the concept below
    void operator()(std::size_t, std::size_t, T*) const {}
};
// Rows are the first dimension of an image (a rank-3 shape): a Conv1D, a Conv on a 1 x L image whose
// out_shape is (L, OC), does not take part.
template <class B, class T>
concept has_cotangent_rows = requires(const T* x, const T* y, const T* dy, T* dx_rows, std::size_t r) {
    requires B::in_shape::rank == 3 && B::in_shape::size == B::in_size;
    { B::cotangent_row_block } -> std::convertible_to<std::size_t>;
    B::template cotangent_rows<T>(x, y, dy, dx_rows, r, r, r);
};
template <class B, class T>
concept has_pullback_from_rows = requires(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy,
                                          T* dx, std::size_t n) {
    requires B::out_shape::rank == 3;
    B::template pullback_from_rows<T>(p, g, x, y, saved, scratch, dy, dx, n, RowsProbe<T>{}, n);
};

}  // namespace detail

// A layer bound to its input shape that keeps the contract above.
template <class B>
concept BoundLayer = detail::has_layer_sizes<B> && detail::has_out_shape<B> && detail::has_init<B, float> &&
                     detail::has_init<B, double> &&
                     (detail::has_plain_forward<B, float> || detail::has_pass_forward<B, float>) &&
                     (detail::has_plain_forward<B, double> || detail::has_pass_forward<B, double>) &&
                     detail::has_pullback<B, float> && detail::has_pullback<B, double>;

// A layer type that can be bound to InShape.
template <class L, class InShape>
concept LayerFor = requires { typename L::template bound<InShape>; } && BoundLayer<typename L::template bound<InShape>>;

// Fixed parameters (num_fixed_params above): how many a bound layer has, and whether entry i of its
// parameter slice is one (a container answers itself, through fixed_param(i)).
namespace detail {
template <class B>
constexpr std::size_t fixed_param_count() {
    if constexpr (requires { B::num_fixed_params; }) return B::num_fixed_params;
    else return 0;
}
template <class B>
constexpr bool is_fixed_param(std::size_t i) {
    if constexpr (requires { { B::fixed_param(i) } -> std::convertible_to<bool>; }) return B::fixed_param(i);
    else return i < B::num_params && i + fixed_param_count<B>() >= B::num_params;
}
}  // namespace detail

// The fixed entries of Net's parameter buffer (a chain, or any bound layer), as runs in increasing order.
template <class Net>
std::vector<ParamRange> fixed_param_ranges() {
    std::vector<ParamRange> runs;
    if constexpr (detail::fixed_param_count<Net>() > 0)
        for (std::size_t i = 0; i < Net::num_params; ++i) {
            if (!detail::is_fixed_param<Net>(i)) continue;
            if (!runs.empty() && runs.back().first + runs.back().count == i) ++runs.back().count;
            else runs.push_back({i, 1});
        }
    return runs;
}

// The layer's metadata for checkpoints (describe) and for safetensors (torch_layout).
template <class B>
concept Describable = requires {
    { B::describe() } -> std::convertible_to<std::string>;
};
template <class B>
concept TorchDescribable = requires(TorchModules& m, std::size_t offset) { B::torch_layout(m, offset); };

namespace detail {

template <class>
inline constexpr bool always_false = false;

// One readable error for a layer that breaks the contract: the first missing piece, in the order a
// layer is written. The compiler's "required from" line names the layer type L and the shape.
template <class L, class InShape>
consteval bool check_layer_contract() {
    if constexpr (!requires { typename L::template bound<InShape>; }) {
        static_assert(always_false<L>,
                      "chainlet: this Chain element is not a layer for its input shape: a layer type needs a member "
                      "template `template <class InShape> struct bound` (see chainlet/layer.hpp)");
        return false;
    } else {
        using B = typename L::template bound<InShape>;
        if constexpr (!has_layer_sizes<B>) {
            static_assert(always_false<L>,
                          "chainlet: the layer's bound<InShape> lacks one of the constants in_size, out_size, num_params, "
                          "saved_per_sample, scratch_per_sample (see chainlet/layer.hpp)");
            return false;
        } else if constexpr (!has_out_shape<B>) {
            static_assert(always_false<L>,
                          "chainlet: the layer's bound<InShape> needs `using out_shape = Shape<...>` with out_shape::size "
                          "== out_size (see chainlet/layer.hpp)");
            return false;
        } else if constexpr (!has_init<B, float> || !has_init<B, double>) {
            static_assert(always_false<L>,
                          "chainlet: the layer's bound<InShape> needs `template <class T> static void init(std::span<T> "
                          "p, Rng& rng, InitKind kind)` (see chainlet/layer.hpp)");
            return false;
        } else if constexpr (!(has_plain_forward<B, float> || has_pass_forward<B, float>) ||
                             !(has_plain_forward<B, double> || has_pass_forward<B, double>)) {
            static_assert(always_false<L>,
                          "chainlet: the layer's bound<InShape> needs `template <class T> static void forward(const T* p, "
                          "const T* x, T* y, T* saved, std::size_t n)` (see chainlet/layer.hpp)");
            return false;
        } else if constexpr (!has_pullback<B, float> || !has_pullback<B, double>) {
            static_assert(always_false<L>,
                          "chainlet: the layer's bound<InShape> needs `template <class T> static void pullback(const T* "
                          "p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx, std::size_t n)` (see "
                          "chainlet/layer.hpp)");
            return false;
        } else {
            return true;
        }
    }
}

// Stands in for a layer that failed check_layer_contract or rejected its input shape, and for every layer
// after it in its chain, so that the one error that said why is the only one: it has every member a
// layer needs, and the derivative passes, describe and torch_layout pass over it. A program holding
// one compiles only where a layer's rejects_shape is true without a static_assert failing (a user's
// layer that forgot it): then init, forward and pullback throw, and so do the derivative passes'
// rules for it (taylor.hpp, hvp.hpp), rather than compute nothing.
[[noreturn]] inline void stand_in_ran() {
    throw std::logic_error(
        "chainlet: a chain ran a stand-in for a layer that rejected its input shape: that layer's rejects_shape "
        "is true, but no static_assert said why (see chainlet/layer.hpp)");
}
template <class InShape>
struct broken_layer {
    static constexpr std::size_t in_size = InShape::size, out_size = InShape::size;
    using out_shape = InShape;
    static constexpr std::size_t num_params = 0, saved_per_sample = 0, scratch_per_sample = 0;
    template <class T>
    static void init(std::span<T>, Rng&, InitKind) {
        stand_in_ran();
    }
    template <class T>
    static void forward(const T*, const T*, T*, T*, std::size_t) {
        stand_in_ran();
    }
    template <class T>
    static void pullback(const T*, T*, const T*, const T*, T*, T*, T*, T*, std::size_t) {
        stand_in_ran();
    }
    static std::string describe() { return "?"; }
    static void torch_layout(TorchModules&, std::size_t) {}
};

template <class B>
inline constexpr bool is_broken_layer = false;
template <class InShape>
inline constexpr bool is_broken_layer<broken_layer<InShape>> = true;

// A bound layer's rejects_shape, false where it has none (reading it fires the layer's own static_assert).
template <class B>
constexpr bool rejects_its_shape() {
    if constexpr (requires { B::rejects_shape; })
        return B::rejects_shape;
    else
        return false;
}

// Whether L takes InShape: its bound layer's rejects_shape first, then the contract. (The contract check
// sits in an else branch: clang goes on past a condition whose evaluation failed an assertion, and a
// check after the if would then be a second error.)
template <class L, class InShape>
consteval bool binds_to() {
    if constexpr (!requires { typename L::template bound<InShape>; })
        return check_layer_contract<L, InShape>();
    else if constexpr (rejects_its_shape<typename L::template bound<InShape>>())
        return false;
    else
        return check_layer_contract<L, InShape>();
}

template <bool Ok, class L, class InShape>
struct select_bound {
    using type = broken_layer<InShape>;
};
template <class L, class InShape>
struct select_bound<true, L, InShape> {
    using type = typename L::template bound<InShape>;
};

template <class L, class InShape>
using checked_bound = typename select_bound<binds_to<L, InShape>(), L, InShape>::type;

// forward with the pass for the layers that take one.
template <class B, class T>
inline void layer_forward(const T* p, const T* x, T* y, T* saved, std::size_t n, const Pass& pass) {
    if constexpr (has_pass_forward<B, T>)
        B::forward(p, x, y, saved, n, pass);
    else
        B::forward(p, x, y, saved, n);
}

// g zeroed, then the pullback adding into it: what writing g means for a layer without pullback_assign
// (and for Dense's chunks, whose pullback_assign is this for more than one sample).
template <class B, class T>
inline void zero_then_pullback(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                               std::size_t n) {
    if constexpr (B::num_params > 0) std::fill_n(g, B::num_params, T(0));
    B::pullback(p, g, x, y, saved, scratch, dy, dx, n);
}

// The pullback adding into g (accumulate) or writing it: then the layer's own pullback_assign, or
// zero_then_pullback.
template <bool accumulate, class B, class T>
inline void layer_pullback(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                           std::size_t n) {
    if constexpr (accumulate)
        B::pullback(p, g, x, y, saved, scratch, dy, dx, n);
    else if constexpr (has_pullback_assign<B, T>)
        B::pullback_assign(p, g, x, y, saved, scratch, dy, dx, n);
    else
        zero_then_pullback<B>(p, g, x, y, saved, scratch, dy, dx, n);
}

}  // namespace detail

}  // namespace chainlet
