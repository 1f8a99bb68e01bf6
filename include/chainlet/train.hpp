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
#include <memory>
#include <limits>
#include <optional>
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
#include "chainlet/optim/schedule.hpp"
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
    double loss;                  // mean loss of this step's batch (before the update), without the penalties
    double penalty = 0;           // the penalties' value at this step's parameters (FitOptions::penalties)
    double gradient_norm = 0;     // L2 norm of the gradient (penalties included) before clipping
    double learning_rate = 0;     // the rate this step used (FitOptions::schedule), 0 for an optimiser without one
};

struct EpochInfo {
    std::size_t epoch;            // 1-based
    std::size_t epochs;
    double loss;                  // mean of the epoch's per-sample losses, as seen before each update
    double seconds;               // wall time of the epoch's training steps
    // The validation metric at the parameters after this epoch (NaN without a validation set), and
    // whether it is the best so far (the parameters restore_best keeps).
    double validation = std::numeric_limits<double>::quiet_NaN();
    bool best = false;
};

// An L1/L2 penalty on the parameters [first, first + count) of the flat buffer, added to the training
// loss: l1 sum |w| + l2 sum w^2 (Keras's L1L2 convention; gradient l1 sign(w) + 2 l2 w, with sign(0) = 0).
// penalty_on_layer<Net>(i, l1, l2) gives the range of a chain's layer i (all its parameters, biases too).
struct Penalty {
    std::size_t first = 0, count = 0;
    double l1 = 0, l2 = 0;
};

template <class Net>
Penalty penalty_on_layer(std::size_t layer, double l1, double l2) {
    static_assert(requires { Net::param_offset; Net::num_layers; }, "penalty_on_layer needs a Chain (param_offset)");
    if (layer >= Net::num_layers)
        throw std::invalid_argument("penalty_on_layer: layer " + std::to_string(layer) + " of a chain of " +
                                    std::to_string(Net::num_layers) + " layers");
    return {Net::param_offset[layer], Net::param_offset[layer + 1] - Net::param_offset[layer], l1, l2};
}

// A validation set for fit: evaluate() gives the metric at the current values of the parameter buffer
// `params` (the buffer fit trains, which fit checks). validation_set<Net>() builds one from data and a
// metric; any callable will do, e.g. a PINN's error against an exact solution:
//   o.validation = Validation{.evaluate = [&] { return relative_error(p); }, .params = p.data(), .name = "rel_l2"};
struct Validation {
    std::function<double()> evaluate;
    const void* params = nullptr;
    bool higher_is_better = false;
    std::string name = "validation";
};

// Validation metric: the fraction of samples whose largest output is at their integer label.
struct Accuracy {};

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
    // The learning rate of each step is opt.learning_rate() at the start times schedule(at)
    // (chainlet/optim/schedule.hpp); fit restores the starting rate when it returns or throws.
    LearningRateSchedule schedule;
    // Scale the gradient (penalties included) down to this L2 norm when it is longer; 0 = no clipping.
    double clip_norm = 0;
    std::vector<Penalty> penalties;
    // Evaluated after every epoch (EpochInfo::validation). With patience > 0, training stops when the
    // metric has not improved on its best by more than min_delta for `patience` epochs; with
    // restore_best, p ends holding the parameters of the best epoch (the optimiser's state is that of the
    // last step).
    std::optional<Validation> validation;
    std::size_t patience = 0;
    double min_delta = 0;
    bool restore_best = true;
    std::function<void(const StepInfo&)> on_step;    // after every optimiser step
    std::function<void(const EpochInfo&)> on_epoch;  // after every epoch
    std::function<bool(const EpochInfo&)> stop_when; // after on_epoch: true ends training
};

struct FitResult {
    std::size_t steps = 0;
    std::size_t epochs = 0;          // run (fewer than FitOptions::epochs when stopped early)
    double last_epoch_loss = 0;
    double seconds = 0;
    bool stopped_early = false;      // by patience or stop_when
    std::size_t best_epoch = 0;      // of the validation metric (0 without a validation set)
    double best_validation = std::numeric_limits<double>::quiet_NaN();
};

// A Validation (for FitOptions::validation) of `metric` on the samples xv with targets yv, at the values
// p holds when fit evaluates it: a loss type gives the mean per-sample loss (lower is better), Accuracy
// the fraction of correct labels (yv: one std::int32_t per sample; higher is better). p, xv and yv are
// read then, so they must outlive the fit; the workspace and the outputs' buffer are allocated here.
template <class Net, std::ranges::contiguous_range P, detail::Inputs X, std::ranges::contiguous_range Y, class Metric>
Validation validation_set(const P& p, const X& xv, const Y& yv, Metric, int threads = 0) {
    using T = detail::value_t<P>;
    using Label = detail::value_t<Y>;
    constexpr const char* where = "validation_set";
    constexpr bool accuracy = std::is_same_v<Metric, Accuracy>;
    static_assert(accuracy || Loss<Metric, T>, "validation_set: the metric is Accuracy or a loss type (chainlet/losses.hpp)");
    detail::check_threads(where, threads);
    detail::expect_size(where, "the parameter buffer", Net::num_params, std::ranges::size(p));
    const std::size_t n = detail::count_rows(where, detail::input_size(xv), Net::in_size);
    if (n == 0) throw std::invalid_argument("validation_set: the validation set is empty");
    const std::span<const Label> y(std::ranges::data(yv), std::ranges::size(yv));
    if constexpr (accuracy) {
        static_assert(std::is_integral_v<Label>, "validation_set: Accuracy takes integer labels");
        detail::expect_size(where, "the label buffer", n, y.size());
        for (std::size_t s = 0; s < n; ++s)
            if (y[s] < 0 || static_cast<std::size_t>(y[s]) >= Net::out_size)
                throw std::invalid_argument("validation_set: label " + std::to_string(y[s]) + " of sample " +
                                            std::to_string(s) + " is not in [0, " + std::to_string(Net::out_size) + ")");
    } else {
        detail::expect_size(where, "the target buffer", n * Metric::targets_per_sample(Net::out_size), y.size());
        Metric::template check_targets<T>(y, Net::out_size);
    }
    const T* params = std::ranges::data(p);
    auto x = [&] {
        if constexpr (std::is_same_v<X, ByteData>) return xv;
        else return std::span<const detail::value_t<X>>(std::ranges::data(xv), std::ranges::size(xv));
    }();
    struct State {
        Workspace<Net, T> ws;
        std::vector<T> out, dy;
    };
    const int t = resolve_threads(threads);
    auto st = std::make_shared<State>(State{Workspace<Net, T>(n, t), std::vector<T>(n * Net::out_size),
                                            std::vector<T>(Net::out_size)});
    Validation v;
    v.params = params;
    v.higher_is_better = accuracy;
    v.name = accuracy ? "accuracy" : "loss";
    v.evaluate = [st, params, x, y, n, t] {
        predict<Net>(st->ws, std::span<const T>(params, Net::num_params), x, st->out, t);
        double sum = 0;
        for (std::size_t s = 0; s < n; ++s) {
            const T* row = st->out.data() + s * Net::out_size;
            if constexpr (accuracy) {
                sum += static_cast<double>(std::max_element(row, row + Net::out_size) - row == y[s]);
            } else {
                const std::size_t k = Metric::targets_per_sample(Net::out_size);
                sum += static_cast<double>(
                    Metric::template value_and_gradient<T>(row, y.data() + s * k, st->dy.data(), Net::out_size, 1, T(1)));
            }
        }
        return sum / static_cast<double>(n);
    };
    return v;
}

namespace detail {
// A temporary that owns its values (a std::vector returned by a call, say): the Validation would read it
// after it is gone. Views (spans, ByteData) may be temporaries.
template <class R>
constexpr bool owning_temporary = !std::is_lvalue_reference_v<R> && !std::ranges::borrowed_range<R> &&
                                  !std::is_same_v<std::remove_cvref_t<R>, ByteData>;
}  // namespace detail

// validation_set reads its data when fit evaluates it: temporaries that own their values are refused.
template <class Net, class P, class X, class Y, class Metric>
    requires(detail::owning_temporary<X> || detail::owning_temporary<Y>)
Validation validation_set(const P&, X&&, Y&&, Metric, int = 0) = delete;

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

namespace detail {
// An optimiser that minimises a full-batch loss itself (L-BFGS, chainlet/optim/lbfgs.hpp): it says so
// (static constexpr bool minimizes_full_batch = true) and has opt.minimize(x, f, callback), f(x, g) ->
// loss, callback(iteration) -> stop, the iteration's loss, gradient_norm and step as members; the
// result's stopped_at_iteration_limit() says whether a further call could go on.
template <class Opt, class T>
concept LineSearchOptimizer = Opt::minimizes_full_batch && requires(Opt& opt, std::span<T> x) {
    {
        opt.minimize(x, [](std::span<const T>, std::span<T>) { return 0.0; }, [](const auto&) { return true; })
            .stopped_at_iteration_limit()
    } -> std::convertible_to<bool>;
};

template <class Opt, class T>
concept SteppingOptimizer = requires(Opt& opt, std::span<T> p, std::span<const T> g) {
    opt.init(std::size_t{});
    opt.step(p, g);
};

template <class Opt>
concept HasLearningRate = requires(Opt& opt) { opt.set_learning_rate(opt.learning_rate()); };

// Puts the optimiser's learning rate back when fit returns or throws.
template <class Opt>
struct RestoreLearningRate {
    Opt* opt = nullptr;
    double rate = 0;
    ~RestoreLearningRate() {
        if constexpr (HasLearningRate<Opt>)
            if (opt) opt->set_learning_rate(static_cast<decltype(opt->learning_rate())>(rate));
    }
};

inline void check_fit_options(const FitOptions& o, std::size_t num_params, const void* params) {
    if (!(o.clip_norm >= 0) || !std::isfinite(o.clip_norm))
        throw std::invalid_argument("fit: clip_norm is " + number(o.clip_norm) + ", expected 0 (off) or a positive norm");
    for (const Penalty& q : o.penalties) {
        if (q.first > num_params || q.count > num_params - q.first)
            throw std::invalid_argument("fit: a penalty on parameters [" + std::to_string(q.first) + ", " +
                                        std::to_string(q.first + q.count) + ") of " + std::to_string(num_params));
        if (!(q.l1 >= 0 && q.l2 >= 0) || !std::isfinite(q.l1) || !std::isfinite(q.l2))
            throw std::invalid_argument("fit: a penalty's l1 " + number(q.l1) + " and l2 " + number(q.l2) +
                                        " must be finite and >= 0");
    }
    if (o.validation) {
        if (!o.validation->evaluate) throw std::invalid_argument("fit: the validation set has no evaluate function");
        if (o.validation->params != params)
            throw std::invalid_argument("fit: the validation set reads another parameter buffer than the one fit trains "
                                        "(build it with the same p)");
    }
    if (o.patience > 0 && !o.validation)
        throw std::invalid_argument("fit: patience " + std::to_string(o.patience) + " needs a validation set");
    if (!(o.min_delta >= 0)) throw std::invalid_argument("fit: min_delta is " + number(o.min_delta) + ", expected >= 0");
}

// Adds the penalties' gradient to g and returns their value at p (sums in double, in index order).
template <class T>
double add_penalties(const std::vector<Penalty>& penalties, std::span<const T> p, T* g) {
    double value = 0;
    for (const Penalty& q : penalties) {
        double abs_sum = 0, square_sum = 0;
        const T l1(static_cast<T>(q.l1)), two_l2(static_cast<T>(2 * q.l2));
        for (std::size_t i = q.first; i < q.first + q.count; ++i) {
            const T w = p[i];
            abs_sum += std::abs(static_cast<double>(w));
            square_sum += static_cast<double>(w) * static_cast<double>(w);
            g[i] += l1 * static_cast<T>((w > 0) - (w < 0)) + two_l2 * w;
        }
        value += q.l1 * abs_sum + q.l2 * square_sum;
    }
    return value;
}

// The L2 norm of g[0, n) (summed in double, in index order); scales g to norm `clip` when longer.
template <class T>
double clip_gradient(T* g, std::size_t n, double clip) {
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * static_cast<double>(g[i]);
    const double norm = std::sqrt(sum);
    if (clip > 0 && norm > clip) {
        const T scale = static_cast<T>(clip / norm);
        for (std::size_t i = 0; i < n; ++i) g[i] *= scale;
    }
    return norm;
}
}  // namespace detail

// Trains p in place with optimiser opt. All buffers are allocated before the first step; a step
// allocates nothing. A non-finite loss, gradient or updated parameter stops training with
// std::runtime_error naming the epoch and step; p then holds the parameters after the last step whose
// loss, gradient and update were all finite (the optimiser's own state is not rolled back).
// Each step: the batch's mean loss and gradient, plus the penalties' gradient, clipped to
// o.clip_norm, then opt.step at the scheduled learning rate. After each epoch: the validation metric,
// on_epoch, then the stopping rules (patience, stop_when).
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
        T* pp = std::ranges::data(p);
        detail::check_fit_options(o, Net::num_params, pp);
        detail::RestoreLearningRate<Opt> restore_rate;
        if (o.schedule) {
            if constexpr (detail::HasLearningRate<Opt>) {
                restore_rate.rate = static_cast<double>(opt.learning_rate());
                restore_rate.opt = &opt;
            } else {
                throw std::invalid_argument("fit: a schedule needs an optimiser with learning_rate() and set_learning_rate()");
            }
        }
        if (o.check_finite) {
            check_finite(x, Net::in_size, "input");
            check_finite(y, L::targets_per_sample(Net::out_size), "target");
        }
        const std::size_t batch = o.batch == 0 ? n : std::min(o.batch, n);
        const bool shuffle = o.shuffle && batch < n;
        const int threads = resolve_threads(o.threads);

        if constexpr (detail::LineSearchOptimizer<Opt, T>) {
            if (batch != n)
                throw std::invalid_argument("fit: a line-search optimiser (L-BFGS) takes the full batch (batch 0), given batch " +
                                            std::to_string(o.batch) + " of " + std::to_string(n) + " samples");
            if (o.clip_norm > 0) throw std::invalid_argument("fit: clip_norm does not apply to a line-search optimiser");
        }
        static_assert(detail::LineSearchOptimizer<Opt, T> || detail::SteppingOptimizer<Opt, T>,
                      "fit: the optimiser needs init(n) and step(p, g), or, minimising the full batch itself, "
                      "minimizes_full_batch and minimize(x, f, on_iteration) (docs/api.md, \"Your own optimiser\"); "
                      "NewtonCG needs a Hessian-vector product: call its minimize() yourself");
        Workspace<Net, T> ws(batch, threads);
        std::vector<T> g(Net::num_params + 1);  // the gradient, then the loss (see WholeBatch)
        std::vector<T> before_step(Net::num_params);
        std::vector<T> best_params(o.validation && o.restore_best ? Net::num_params : 0);
        std::vector<std::uint32_t> order(shuffle ? n : 0);
        std::iota(order.begin(), order.end(), 0u);
        if (o.reset_optimizer) opt.init(Net::num_params);
        // The network's fixed parameters (layer.hpp): their gradient is zero, and an optimiser that also
        // decays (AdamW) is told to leave them.
        if constexpr (detail::fixed_param_count<Net>() > 0 && requires { opt.keep_fixed(std::vector<ParamRange>{}); })
            opt.keep_fixed(fixed_param_ranges<Net>());
        Rng rng(o.seed);

        const std::span<T> ps(pp, Net::num_params);
        FitResult result;
        const std::size_t steps = (n + batch - 1) / batch;
        const bool higher_is_better = o.validation && o.validation->higher_is_better;
        double monitored = std::numeric_limits<double>::quiet_NaN();  // the schedule's metric
        std::size_t epochs_since_best = 0;
        // After epoch e (an iteration of a line-search optimiser): the validation metric and the best
        // parameters, on_epoch, then the stopping rules; true ends training.
        auto end_epoch = [&](std::size_t e, double epoch_loss, double secs) {
            result.seconds += secs;
            result.epochs = e;
            result.last_epoch_loss = epoch_loss;
            EpochInfo info{e, o.epochs, epoch_loss, secs};
            monitored = epoch_loss;
            if (o.validation) {
                const double v = o.validation->evaluate();
                info.validation = monitored = v;
                // NaN never improves; the first finite value always does
                const double gain = higher_is_better ? v - result.best_validation : result.best_validation - v;
                info.best = !std::isnan(v) && (result.best_epoch == 0 || std::isnan(result.best_validation) ||
                                               gain > o.min_delta);
                if (info.best) {
                    result.best_epoch = e;
                    result.best_validation = v;
                    epochs_since_best = 0;
                    if (o.restore_best) std::copy(ps.begin(), ps.end(), best_params.begin());
                } else {
                    ++epochs_since_best;
                }
            }
            if (o.on_epoch) o.on_epoch(info);
            if ((o.patience > 0 && epochs_since_best >= o.patience) || (o.stop_when && o.stop_when(info))) {
                result.stopped_early = e < o.epochs;
                return true;
            }
            return false;
        };
        if constexpr (detail::LineSearchOptimizer<Opt, T>) {
            // The full batch, one line-search iteration per epoch; penalties are part of the loss.
            double last_penalty = 0;
            auto f = [&](std::span<const T> at, std::span<T> grad) {
                const auto [first, count] = split.share(n);
                auto xb = detail::input_rows<T>(x);
                xb.data += first * Net::in_size;
                const auto* yb = std::ranges::data(y) + first * L::targets_per_sample(Net::out_size);
                // one step number per iteration: the line search compares values of one loss
                const Pass pass{.training = true, .seed = o.seed, .step = o.first_step + result.steps, .first_sample = first};
                if (count > 0)
                    g[Net::num_params] = ws.value_and_gradient(at.data(), g.data(), xb, yb, nullptr, count, loss, threads, pass);
                else
                    std::fill(g.begin(), g.end(), T(0));
                split.template reduce<T>(std::span<T>(g), count, n);
                last_penalty = detail::add_penalties<T>(o.penalties, at, g.data());
                std::copy(g.begin(), g.begin() + Net::num_params, grad.begin());
                return static_cast<double>(g[Net::num_params]) + last_penalty;
            };
            auto t0 = std::chrono::steady_clock::now();
            bool stop = false;
            std::size_t e = 0;
            // minimize() again after the optimiser's own iteration limit, until fit's epochs or a stopping rule
            for (bool again = o.epochs > 0; again && !stop;)
                again = opt.minimize(ps, f, [&](const auto& it) {
                               ++result.steps;
                               ++e;
                               if (o.on_step)
                                   o.on_step(StepInfo{e, 1, 1, it.loss - last_penalty, last_penalty, it.gradient_norm, it.step});
                               const double secs =
                                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                               stop = end_epoch(e, it.loss - last_penalty, secs) || e >= o.epochs;
                               t0 = std::chrono::steady_clock::now();
                               return stop;
                           }).stopped_at_iteration_limit();
        } else if constexpr (detail::SteppingOptimizer<Opt, T>) {
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
                const std::uint64_t step_number = detail::step_number(opt, o.first_step + result.steps);
                // Dropout keys its masks by (seed, step, sample index in the whole batch): first is where this
                // process's slice starts, so the masks do not depend on how many processes share the batch.
                const Pass pass{.training = true, .seed = o.seed, .step = step_number, .first_sample = first};
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
                StepInfo info{e, s + 1, steps, static_cast<double>(l)};
                info.penalty = detail::add_penalties<T>(o.penalties, ps, g.data());
                info.gradient_norm = detail::clip_gradient(g.data(), Net::num_params, o.clip_norm);
                if constexpr (detail::HasLearningRate<Opt>) {
                    if (o.schedule) {
                        const double factor = o.schedule(ScheduleInput{static_cast<std::size_t>(step_number), e, o.epochs,
                                                                       steps, monitored, higher_is_better});
                        if (!(factor >= 0) || !std::isfinite(factor))
                            throw std::invalid_argument("fit: the schedule gave the factor " + detail::number(factor) +
                                                        " at step " + std::to_string(step_number) +
                                                        ", expected a finite factor >= 0");
                        opt.set_learning_rate(static_cast<decltype(opt.learning_rate())>(restore_rate.rate * factor));
                    }
                    info.learning_rate = static_cast<double>(opt.learning_rate());
                }
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
                if (o.on_step) o.on_step(info);
            }
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (end_epoch(e, epoch_loss / static_cast<double>(n), secs)) break;
        }
        }
        if (o.validation && o.restore_best && result.best_epoch > 0 && result.best_epoch != result.epochs)
            std::copy(best_params.begin(), best_params.end(), ps.begin());
        return result;
    }
}

}  // namespace chainlet
