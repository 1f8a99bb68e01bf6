// The public entry points: init_params, value_and_gradient, predict and fit. They take any contiguous
// ranges (std::vector, std::span, arrays), check every runtime size once, and report a mismatch with an
// exception that says what was expected and what was given.
//
// Data are sample-major, one row per sample as in PyTorch: x holds n rows of Net::in_size values (an
// image row by row, channels last), y holds n rows of the loss's targets (Net::out_size values, or one
// integer label).
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "chainlet/checks.hpp"
#include "chainlet/init.hpp"
#include "chainlet/losses.hpp"
#include "chainlet/random.hpp"
#include "chainlet/workspace.hpp"

namespace chainlet {

// Inputs kept as bytes (8-bit images, say) at a quarter of the memory of floats; byte b is read as
// b * scale + offset when a chunk is gathered. Accepted wherever inputs are.
struct ByteData {
    std::span<const std::uint8_t> values;
    double scale = 1.0;
    double offset = 0.0;
};

namespace detail {

// The inputs as a workspace reads them: a contiguous range of T, or ByteData.
template <class T, class X>
auto input_rows(const X& x) {
    if constexpr (std::is_same_v<X, ByteData>) {
        return InputRows<T, std::uint8_t>{x.values.data(), static_cast<T>(x.scale), static_cast<T>(x.offset)};
    } else if constexpr (!std::is_same_v<value_t<X>, T>) {
        static_assert(std::is_same_v<value_t<X>, T>, "the inputs must have the parameters' element type (or be ByteData)");
        return InputRows<T, T>{nullptr};  // reached only after the assertion failed: no conversion error after it
    } else {
        return InputRows<T, T>{std::ranges::data(x)};
    }
}
// Whether Y holds the targets loss L expects for element type T; true for a loss without target<T>,
// whose Loss assertion is then the error (not a missing member named here first).
template <class L, class T, class Y>
constexpr bool targets_match() {
    if constexpr (requires { typename L::template target<T>; })
        return std::is_same_v<value_t<Y>, typename L::template target<T>>;
    else
        return true;
}
template <class X>
std::size_t input_size(const X& x) {
    if constexpr (std::is_same_v<X, ByteData>) return x.values.size();
    else return std::ranges::size(x);
}
template <class X>
concept Inputs = std::same_as<X, ByteData> || std::ranges::contiguous_range<X>;

// Whether the network's last layer outputs probabilities (Softmax): SoftmaxCrossEntropy takes logits and
// applies the softmax itself, so training through a Softmax layer into it would apply it twice.
template <class Net>
constexpr bool ends_in_probabilities() {
    if constexpr (requires { Net::num_layers; typename Net::template layer<Net::num_layers - 1>; })
        return requires { Net::template layer<Net::num_layers - 1>::outputs_probabilities; };
    else
        return false;
}
template <class Net, class L>
inline constexpr bool softmax_twice = std::is_same_v<L, SoftmaxCrossEntropy> && ends_in_probabilities<Net>();

// The type checks value_and_gradient and fit share, one static_assert each (the loss's interface, the
// targets' element type, no softmax twice). The result says whether the caller's body may be compiled:
// false where the loss or targets assertion failed, so that the discarded body adds no error after it.
template <class Net, class L, class T, class Y>
constexpr bool training_types_ok() {
    constexpr bool targets_ok = targets_match<L, T, Y>();
    static_assert(Loss<L, T>, "the loss does not provide the interface documented in chainlet/losses.hpp");
    static_assert(targets_ok, "the targets' element type is not the one the loss expects");
    static_assert(!softmax_twice<Net, L>,
                  "SoftmaxCrossEntropy applies the softmax itself: train the chain without its final Softmax layer "
                  "and add Softmax only to the chain you predict with (same parameters)");
    return Loss<L, T> && targets_ok;
}

// The step number a fit step passes to the layers (Pass::step, for Dropout's masks): the optimiser's
// own count of the steps it has taken when it keeps one (Adam, AdamW: steps(), which checkpoints save,
// so a resumed fit continues the numbering), otherwise fit's count from FitOptions::first_step.
template <class Opt>
std::uint64_t step_number(const Opt& opt, std::uint64_t fit_count) {
    if constexpr (requires { { opt.steps() } -> std::convertible_to<std::uint64_t>; }) return opt.steps();
    else return fit_count;
}

inline void check_threads(const char* where, int threads) {
    if (threads < 0)
        throw std::invalid_argument(std::string(where) + ": threads is " + std::to_string(threads) +
                                    ", expected 0 (all cores) or a positive count");
}

template <class T>
const char* non_finite_name(T v) {
    return std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
}

}  // namespace detail

// Opt-in check of data before training (fit does it with FitOptions::check_finite): throws
// std::invalid_argument naming the first sample (row of `row` values) holding a NaN or an infinity,
// e.g. "check_finite: input sample 17, value 3 of 4, is NaN". Integer data (labels) are always finite;
// for ByteData the scale and offset are checked.
template <detail::Inputs X>
void check_finite(const X& x, std::size_t row, const char* what = "input") {
    if (row == 0) throw std::invalid_argument("check_finite: the row size is 0, expected at least 1");
    if constexpr (std::is_same_v<X, ByteData>) {
        if (!std::isfinite(x.scale) || !std::isfinite(x.offset))
            throw std::invalid_argument(std::string("check_finite: ") + what + " ByteData scale " + std::to_string(x.scale) +
                                        " / offset " + std::to_string(x.offset) + " is not finite");
    } else if constexpr (std::is_floating_point_v<detail::value_t<X>>) {
        const auto* v = std::ranges::data(x);
        const std::size_t n = std::ranges::size(x);
        for (std::size_t i = 0; i < n; ++i)
            if (!std::isfinite(v[i]))
                throw std::invalid_argument(std::string("check_finite: ") + what + " sample " + std::to_string(i / row) +
                                            ", value " + std::to_string(i % row) + " of " + std::to_string(row) +
                                            ", is " + detail::non_finite_name(v[i]));
    }
}

// The calling thread's workspace for (Net, T), used by the convenience overloads below.
template <class Net, class T>
Workspace<Net, T>& thread_workspace() {
    thread_local Workspace<Net, T> ws;
    return ws;
}

// Fills p (Net::num_params values) with Glorot weights and zero biases, reproducibly from seed.
template <class Net, std::ranges::contiguous_range P>
void init_params(P&& p, std::uint64_t seed, InitKind kind = InitKind::glorot_uniform) {
    using T = detail::value_t<P>;
    detail::expect_size("init_params", "the parameter buffer", Net::num_params, std::ranges::size(p));
    Net::template init<T>(std::span<T>(std::ranges::data(p), Net::num_params), seed, kind);
}

// Mean loss over the samples in x and its gradient, written into g (overwritten). No allocation once
// the workspace has seen a batch this large. It is a training pass: pass tells the layers that
// (training = true) and, for Dropout, which step this is; a loop of your own that calls it per step
// should give each step its number (Pass{.training = true, .seed = s, .step = t}), or every step draws
// the same masks. (fit does this itself.)
template <class Net, std::ranges::contiguous_range P, std::ranges::contiguous_range G, detail::Inputs X,
          std::ranges::contiguous_range Y, class L>
detail::value_t<G> value_and_gradient(Workspace<Net, detail::value_t<G>>& ws, const P& p, G&& g, const X& x,
                                      const Y& y, const L& loss, int threads = 1, Pass pass = {.training = true}) {
    using T = detail::value_t<G>;
    constexpr bool params_match = std::is_same_v<detail::value_t<P>, T>;
    static_assert(params_match, "parameters and gradient must have the same element type");
    constexpr bool types_ok = detail::training_types_ok<Net, L, T, Y>();
    if constexpr (!params_match || !types_ok) {
        return T(0);  // only where an assertion failed: the body below, discarded, adds no error
    } else {
        constexpr const char* where = "value_and_gradient";
        detail::check_threads(where, threads);
        detail::expect_size(where, "the parameter buffer", Net::num_params, std::ranges::size(p));
        detail::expect_size(where, "the gradient buffer", Net::num_params, std::ranges::size(g));
        const std::size_t n = detail::count_rows(where, detail::input_size(x), Net::in_size);
        detail::expect_size(where, "the target buffer", n * L::targets_per_sample(Net::out_size), std::ranges::size(y));
        L::template check_targets<T>(std::span(std::ranges::data(y), std::ranges::size(y)), Net::out_size);
        return ws.value_and_gradient(std::ranges::data(p), std::ranges::data(g), detail::input_rows<T>(x),
                                     std::ranges::data(y), nullptr, n, loss, threads, pass);
    }
}

template <class Net, std::ranges::contiguous_range P, std::ranges::contiguous_range G, detail::Inputs X,
          std::ranges::contiguous_range Y, class L>
detail::value_t<G> value_and_gradient(const P& p, G&& g, const X& x, const Y& y, const L& loss, int threads = 1,
                                      Pass pass = {.training = true}) {
    return value_and_gradient<Net>(thread_workspace<Net, detail::value_t<G>>(), p, g, x, y, loss, threads, pass);
}

// Writes the outputs for the samples in x into out (n rows of Net::out_size), the caller's buffer:
// nothing the next call overwrites.
template <class Net, std::ranges::contiguous_range P, detail::Inputs X, std::ranges::contiguous_range O>
void predict(Workspace<Net, detail::value_t<O>>& ws, const P& p, const X& x, O&& out, int threads = 1) {
    using T = detail::value_t<O>;
    constexpr bool params_match = std::is_same_v<detail::value_t<P>, T>;
    static_assert(params_match, "parameters and outputs must have the same element type");
    if constexpr (params_match) {  // else the assertion above is the only error
        constexpr const char* where = "predict";
        detail::check_threads(where, threads);
        detail::expect_size(where, "the parameter buffer", Net::num_params, std::ranges::size(p));
        const std::size_t n = detail::count_rows(where, detail::input_size(x), Net::in_size);
        detail::expect_size(where, "the output buffer", n * Net::out_size, std::ranges::size(out));
        ws.predict(std::ranges::data(p), detail::input_rows<T>(x), std::ranges::data(out), n, threads);
    }
}

template <class Net, std::ranges::contiguous_range P, detail::Inputs X, std::ranges::contiguous_range O>
void predict(const P& p, const X& x, O&& out, int threads = 1) {
    predict<Net>(thread_workspace<Net, detail::value_t<O>>(), p, x, out, threads);
}

struct StepInfo {
    std::size_t epoch;            // 1-based
    std::size_t step;             // 1-based, within the epoch
    std::size_t steps_per_epoch;
    double loss;                  // mean loss of this step's batch (before the update)
};

struct EpochInfo {
    std::size_t epoch;            // 1-based
    std::size_t epochs;
    double loss;                  // mean of the epoch's per-sample losses, as seen before each update
    double seconds;               // wall time of the epoch's training steps
};

struct FitOptions {
    std::size_t epochs = 1;
    std::size_t batch = 0;        // samples per step; 0 = the whole data set (full batch)
    std::uint64_t seed = 0;       // seeds the shuffling and Dropout's masks
    bool shuffle = true;          // reshuffle the samples every epoch (ignored for a full batch)
    int threads = 0;              // 0 = all cores (OpenMP's default)
    bool check_finite = false;    // check x and y with check_finite() before training (one pass over the data)
    // true: start with opt.init(num_params), a fresh optimiser state. false: continue from the state opt
    // holds, e.g. after load_checkpoint (chainlet's optimisers initialise themselves on their first step
    // when empty and reject a state of the wrong size).
    bool reset_optimizer = true;
    // The number of the first step, for Dropout's masks, when the optimiser keeps no step count (SGD);
    // with Adam/AdamW the step number is the optimiser's steps(), so a resumed fit continues by itself.
    std::uint64_t first_step = 0;
    std::function<void(const StepInfo&)> on_step;    // after every optimiser step
    std::function<void(const EpochInfo&)> on_epoch;  // after every epoch
};

struct FitResult {
    std::size_t steps = 0;
    double last_epoch_loss = 0;
    double seconds = 0;
};

// How fit shares each batch among cooperating processes (chainlet/mpi/fit.hpp spreads it over MPI
// ranks). share(m) is the slice {first, count} of an m-sample batch that this process computes;
// reduce(gl, count, m) gets this process's mean gradient over its slice followed by its mean loss
// (num_params + 1 values, one buffer so that one message carries both) and must leave in gl the mean
// gradient and loss over the whole batch, bit for bit the same on every process. The default: one
// process computes every batch whole.
struct WholeBatch {
    struct Slice {
        std::size_t first, count;
    };
    Slice share(std::size_t m) const { return {0, m}; }
    template <class T>
    void reduce(std::span<T>, std::size_t, std::size_t) const {}
};

// Trains p in place with optimiser opt. All buffers are allocated before the first step; a step
// allocates nothing. A non-finite loss, gradient or updated parameter stops training with
// std::runtime_error naming the epoch and step; p then holds the parameters after the last step whose
// loss, gradient and update were all finite (the optimiser's own state is not rolled back).
template <class Net, std::ranges::contiguous_range P, class L, detail::Inputs X, std::ranges::contiguous_range Y,
          class Opt, class Split = WholeBatch>
FitResult fit(P&& p, const L& loss, const X& x, const Y& y, Opt& opt, const FitOptions& o = {}, Split&& split = {}) {
    using T = detail::value_t<P>;
    if constexpr (!detail::training_types_ok<Net, L, T, Y>()) {
        return {};  // only where an assertion failed: the body below, discarded, adds no error
    } else {
        constexpr const char* where = "fit";
        detail::check_threads(where, o.threads);
        detail::expect_size(where, "the parameter buffer", Net::num_params, std::ranges::size(p));
        const std::size_t n = detail::count_rows(where, detail::input_size(x), Net::in_size);
        detail::expect_size(where, "the target buffer", n * L::targets_per_sample(Net::out_size),
                            std::ranges::size(y));
        if (n > UINT32_MAX)
            throw std::invalid_argument("fit: " + std::to_string(n) + " samples, expected at most 2^32 - 1");
        L::template check_targets<T>(std::span(std::ranges::data(y), std::ranges::size(y)), Net::out_size);
        if (o.check_finite) {
            check_finite(x, Net::in_size, "input");
            check_finite(y, L::targets_per_sample(Net::out_size), "target");
        }
        const std::size_t batch = o.batch == 0 ? n : std::min(o.batch, n);
        const bool shuffle = o.shuffle && batch < n;
        const int threads = resolve_threads(o.threads);

        Workspace<Net, T> ws(batch, threads);
        std::vector<T> g(Net::num_params + 1);  // the gradient, then the loss (see WholeBatch)
        std::vector<T> before_step(Net::num_params);
        std::vector<std::uint32_t> order(shuffle ? n : 0);
        std::iota(order.begin(), order.end(), 0u);
        if (o.reset_optimizer) opt.init(Net::num_params);
        Rng rng(o.seed);

        T* pp = std::ranges::data(p);
        const std::span<T> ps(pp, Net::num_params);
        FitResult result;
        const std::size_t steps = (n + batch - 1) / batch;
        for (std::size_t e = 1; e <= o.epochs; ++e) {
            const auto t0 = std::chrono::steady_clock::now();
            if (shuffle)
                for (std::size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
            double epoch_loss = 0;
            for (std::size_t s = 0; s < steps; ++s) {
                const std::size_t b0 = s * batch, m = std::min(batch, n - b0);
                const auto [first, count] = split.share(m);  // this process's rows [b0 + first, b0 + first + count)
                auto xb = detail::input_rows<T>(x);
                if (!shuffle) xb.data += (b0 + first) * Net::in_size;
                const auto* yb =
                    std::ranges::data(y) + (shuffle ? 0 : (b0 + first) * L::targets_per_sample(Net::out_size));
                const std::uint32_t* rows = shuffle ? order.data() + b0 + first : nullptr;
                // Dropout keys its masks by (seed, step, sample index in the whole batch): first is where this
                // process's slice starts, so the masks do not depend on how many processes share the batch.
                const Pass pass{.training = true,
                                .seed = o.seed,
                                .step = detail::step_number(opt, o.first_step + result.steps),
                                .first_sample = first};
                if (count > 0)
                    g[Net::num_params] = ws.value_and_gradient(pp, g.data(), xb, yb, rows, count, loss, threads, pass);
                else
                    std::fill(g.begin(), g.end(), T(0));
                split.template reduce<T>(std::span<T>(g), count, m);
                const T l = g[Net::num_params];
                bool finite = std::isfinite(l);
                for (std::size_t j = 0; finite && j < g.size(); ++j) finite = std::isfinite(g[j]);
                if (!finite)
                    throw std::runtime_error("fit: the " + std::string(std::isfinite(l) ? "gradient" : "loss") +
                                             " became non-finite at epoch " + std::to_string(e) + ", step " +
                                             std::to_string(s + 1) + "; the parameters are those before this step");
                // Keep p to restore it if the update itself overflows (finite gradient, huge step).
                std::copy(ps.begin(), ps.end(), before_step.begin());
                opt.step(ps, std::span<const T>(g.data(), Net::num_params));
                if (!std::ranges::all_of(ps, [](T v) { return std::isfinite(v); })) {
                    std::copy(before_step.begin(), before_step.end(), ps.begin());
                    throw std::runtime_error("fit: the parameter update became non-finite at epoch " + std::to_string(e) +
                                             ", step " + std::to_string(s + 1) +
                                             "; the parameters are those before this step");
                }
                ++result.steps;
                epoch_loss += static_cast<double>(l) * static_cast<double>(m);
                if (o.on_step) o.on_step(StepInfo{e, s + 1, steps, static_cast<double>(l)});
            }
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            result.seconds += secs;
            result.last_epoch_loss = epoch_loss / static_cast<double>(n);
            if (o.on_epoch) o.on_epoch(EpochInfo{e, o.epochs, result.last_epoch_loss, secs});
        }
        return result;
    }
}

}  // namespace chainlet
