// Input derivatives of a network in one forward pass, and the pullback of a loss of them to the
// parameters (physics-informed training). No tape: every layer's rule is written out.
//
// For a chunk of n samples the pass carries C = 1 + D + K columns per feature (jet.hpp: the value, D
// tangents, K second-derivative sums; feature-major, element [f][c][s] at f * C n + c n + s, so one
// matrix product moves all columns of a layer), with S_k = {i} a Hessian diagonal entry and S_k = all
// the Laplacian. The pass walks the network by each layer's jet_rule (layer.hpp), which its own header
// holds, recursively through containers (docs/api.md lists the built-in layers that have one); a user's
// layer joins by declaring one. A layer without a rule fails to compile with one
// static_assert whose "required from" line names it (jet.hpp); so does a layer with a fused activation whose
// activation has no jet (a user's activation may leave it out: detail::checked_jet), with its own message.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "chainlet/chain.hpp"
#include "chainlet/checks.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/memory.hpp"
#include "chainlet/parallel.hpp"

namespace chainlet {

// Which derivatives the pass carries. tangents: D, the number of tangent columns (for input derivatives,
// the input size: tangent i is d/dx_i). second[k]: the tangent indices whose pure second derivatives
// column k sums.
struct DerivativeSpec {
    std::size_t tangents = 0;
    std::vector<std::vector<std::size_t>> second;

    // u, grad u and the Laplacian sum_i d2u/dx_i^2 for an input of `dims` coordinates.
    static DerivativeSpec laplacian(std::size_t dims) {
        DerivativeSpec s{dims, {{}}};
        for (std::size_t i = 0; i < dims; ++i) s.second[0].push_back(i);
        return s;
    }
    // u, grad u and d2u/dx_c^2 for each listed coordinate c (in that order).
    static DerivativeSpec diagonal(std::size_t dims, std::vector<std::size_t> coords) {
        DerivativeSpec s{dims, {}};
        for (auto c : coords) s.second.push_back({c});
        return s;
    }
    // u and grad u only.
    static DerivativeSpec gradient(std::size_t dims) { return {dims, {}}; }
    // u only (e.g. a boundary condition on the value).
    static DerivativeSpec value() { return {0, {}}; }

    std::size_t columns() const { return 1 + tangents + second.size(); }
};

// What a residual functor reads for a chunk of n samples (all feature-major, sample s at [.. * n + s]).
template <class T>
struct PointDerivatives {
    std::size_t n = 0, first_sample = 0, dims = 0, outputs = 0, tangents = 0, num_second = 0;
    const T* x = nullptr;    // dims x n: the inputs
    const T* jet = nullptr;  // outputs x C x n
    std::size_t columns() const { return 1 + tangents + num_second; }
    const T* u(std::size_t o = 0) const { return jet + o * columns() * n; }
    const T* du(std::size_t i, std::size_t o = 0) const { return jet + (o * columns() + 1 + i) * n; }
    const T* d2u(std::size_t k, std::size_t o = 0) const { return jet + (o * columns() + 1 + tangents + k) * n; }
    const T* coord(std::size_t i) const { return x + i * n; }
};

// Where a residual functor writes the cotangents of its loss (zeroed before the call; same layout).
template <class T>
struct PointCotangents {
    std::size_t n = 0, outputs = 0, tangents = 0, num_second = 0;
    T* jet = nullptr;
    std::size_t columns() const { return 1 + tangents + num_second; }
    T* u(std::size_t o = 0) const { return jet + o * columns() * n; }
    T* du(std::size_t i, std::size_t o = 0) const { return jet + (o * columns() + 1 + i) * n; }
    T* d2u(std::size_t k, std::size_t o = 0) const { return jet + (o * columns() + 1 + tangents + k) * n; }
};

// A residual: T operator()(const PointDerivatives<T>&, PointCotangents<T>&, T scale) const returning the
// sum over the chunk of its per-sample loss and adding scale * d(sum)/d(u, du, d2u) into the cotangents.
template <class R, class T>
concept ResidualFunctor = requires(const R& r, const PointDerivatives<T>& d, PointCotangents<T>& c, T scale) {
    { r(d, c, scale) } -> std::convertible_to<T>;
};

// The squared residual of a linear PDE for a network with one output:
//   r = a u + sum_i b_i du/dx_i + sum_k c_k (second column k) - source(x),   loss = mean r^2.
// Poisson -Lap u = f with DerivativeSpec::laplacian: {.second = {1}, .source = -f};
// heat u_t = alpha u_xx with x = (x, t) and DerivativeSpec::diagonal(2, {0}): {.first = {0, 1}, .second = {-alpha}}.
// source(const T* x, std::size_t sample) -> T: x the sample's coordinates, sample its index in the
// whole call (so a source known only at the points can be a table lookup).
template <class T, class Source>
struct LinearResidual {
    T value = T(0);
    std::vector<T> first;   // b_i (empty: none)
    std::vector<T> second;  // c_k (empty: none)
    Source source;

    T operator()(const PointDerivatives<T>& d, PointCotangents<T>& c, T scale) const {
        T sum = 0;
        T point[16];
        if (d.dims > 16)
            throw std::invalid_argument("LinearResidual: at most 16 input coordinates, the network has " +
                                        std::to_string(d.dims) + "; write the residual as a functor (docs/api.md)");
        for (std::size_t s = 0; s < d.n; ++s) {
            for (std::size_t i = 0; i < d.dims; ++i) point[i] = d.x[i * d.n + s];
            T r = value * d.u()[s] - source(static_cast<const T*>(point), d.first_sample + s);
            for (std::size_t i = 0; i < first.size(); ++i) r += first[i] * d.du(i)[s];
            for (std::size_t k = 0; k < second.size(); ++k) r += second[k] * d.d2u(k)[s];
            sum += r * r;
            const T dr = T(2) * scale * r;
            c.u()[s] += value * dr;
            for (std::size_t i = 0; i < first.size(); ++i) c.du(i)[s] += first[i] * dr;
            for (std::size_t k = 0; k < second.size(); ++k) c.d2u(k)[s] += second[k] * dr;
        }
        return sum;
    }
};
// linear_residual<double>({b_0, b_1}, {c_0}, source, a): the LinearResidual above.
template <class T, class Source>
LinearResidual<T, Source> linear_residual(std::vector<T> first, std::vector<T> second, Source source, T value = T(0)) {
    return {value, std::move(first), std::move(second), std::move(source)};
}

// The input-derivative pass of the chain Net (the layers of the header comment) for element type T,
// with its buffers for up to `batch` samples on `threads` threads, allocated once (calls within these
// bounds allocate nothing). Chunking and grouping as in Workspace (workspace.hpp): the same bits on any thread count.
template <class Net, class T>
class DerivativeWorkspace {
public:
    static constexpr std::size_t L = Net::num_layers;
    static constexpr std::size_t max_groups = 32;
    // The whole network's rule (a chain: its layers' rules one after the other, recursively).
    using Rule = detail::jet_rule_of<typename Net::sequence>;
    // A chain whose layers each save one feature per output and need no scratch (a chain of affine maps) sizes its
    // chunk by its boundaries' widths, as it did before containers, so that its results keep their bits.
    static constexpr bool plain_chain = []<std::size_t... I>(std::index_sequence<I...>) {
        using detail::jet_rule_of;
        return ((jet_rule_of<typename Net::template layer<I>>::saved == Net::template layer<I>::out_size &&
                 jet_rule_of<typename Net::template layer<I>>::scratch == 0) &&
                ...);
    }(std::make_index_sequence<L>{});

    DerivativeWorkspace(DerivativeSpec spec, std::size_t batch, int threads = 0) : spec_(std::move(spec)) {
        for (const auto& set : spec_.second) {
            if (set.empty()) throw std::invalid_argument("DerivativeSpec: a second-derivative column sums no coordinate");
            for (auto i : set)
                if (i >= spec_.tangents)
                    throw std::invalid_argument("DerivativeSpec: second-derivative coordinate " + std::to_string(i) +
                                                " but only " + std::to_string(spec_.tangents) + " tangents");
        }
        C_ = spec_.columns();
        containing_.assign(spec_.tangents, {});
        for (std::size_t k = 0; k < spec_.second.size(); ++k)
            for (auto i : spec_.second[k]) containing_[i].push_back(k);
        // About 512 KiB of columns per chunk (two buffers per layer boundary), a multiple of 16 in [16, 256].
        std::size_t per_sample = 0;
        if constexpr (plain_chain)
            for (std::size_t l = 0; l <= L; ++l) per_sample += 2 * Net::width[l] * C_ * sizeof(T);
        else
            per_sample = (2 * Net::in_size + 2 * Net::out_size + Rule::saved + Rule::scratch) * C_ * sizeof(T);
        chunk_ = std::clamp<std::size_t>((512 * 1024 / per_sample) / 16 * 16, 16, 256);
        reserve(batch, threads);
    }

    const DerivativeSpec& spec() const { return spec_; }
    std::size_t chunk() const { return chunk_; }
    std::size_t num_chunks(std::size_t n) const { return (n + chunk_ - 1) / chunk_; }
    std::size_t chunks_per_group(std::size_t n) const { return (num_chunks(n) + max_groups - 1) / max_groups; }
    std::size_t num_groups(std::size_t n) const {
        const std::size_t per = std::max<std::size_t>(chunks_per_group(n), 1);
        return (num_chunks(n) + per - 1) / per;
    }

    void reserve(std::size_t batch, int threads = 0) {
        threads = resolve_threads(threads);
        if (scratch_.size() < static_cast<std::size_t>(threads)) scratch_.resize(static_cast<std::size_t>(threads));
        for (auto& s : scratch_) s.reserve(Net::in_size, C_, chunk_);
        // One partial gradient per slot of parallel_for_ordered, added into g group by group in order.
        const std::size_t groups = num_groups(batch), partials = ordered_slots(groups, threads);
        if (partial_.size() < partials * Net::num_params) partial_.resize(partials * Net::num_params);
        if (losses_.size() < groups) losses_.resize(groups);
    }

    // Input derivatives of n samples: x is n rows of Net::in_size (sample-major); out receives, per
    // sample, Net::out_size x C values (output o, column c at [s * out_size * C + o * C + c]).
    // With tangents == in_size, tangent i is d/dx_i.
    void derivatives(const T* p, const T* x, T* out, std::size_t n, int threads = 1) {
        require_input_tangents("derivatives");
        threads = resolve_threads(threads);
        reserve(n, threads);
        parallel_for(num_chunks(n), threads, [&](std::size_t c, int tid) {
            Scratch& s = scratch_[static_cast<std::size_t>(tid)];
            const std::size_t s0 = c * chunk_, m = std::min(chunk_, n - s0);
            load_inputs(s, x, nullptr, s0, m);
            forward(p, s, m);
            const T* y = s.out;
            const std::size_t cols = Net::out_size * C_;
            for (std::size_t j = 0; j < m; ++j)
                for (std::size_t q = 0; q < cols; ++q) out[(s0 + j) * cols + q] = y[q * m + j];
        });
    }

    // Forward mode through the chain (jvp): for each sample s, y = net(x_s) and ydot = J(x_s) v_s for
    // tangents_per_sample = spec().tangents directions v_s (rows of v: tangents x in_size per sample,
    // direction-major). y: n x out_size, ydot: n x tangents x out_size (sample-major). With second-order
    // columns, d2 (n x K x out_size) receives sum_{i in S_k} v_i^T H v_i (H: the output's input Hessian).
    void jvp(const T* p, const T* x, const T* v, T* y, T* ydot, std::size_t n, int threads = 1, T* d2 = nullptr) {
        threads = resolve_threads(threads);
        reserve(n, threads);
        const std::size_t D = spec_.tangents, K = spec_.second.size();
        parallel_for(num_chunks(n), threads, [&](std::size_t c, int tid) {
            Scratch& s = scratch_[static_cast<std::size_t>(tid)];
            const std::size_t s0 = c * chunk_, m = std::min(chunk_, n - s0);
            load_inputs(s, x, v, s0, m);
            forward(p, s, m);
            const T* out = s.out;
            constexpr std::size_t O = Net::out_size;
            for (std::size_t j = 0; j < m; ++j)
                for (std::size_t o = 0; o < O; ++o) {
                    const T* col = out + o * C_ * m;
                    y[(s0 + j) * O + o] = col[j];
                    for (std::size_t i = 0; i < D; ++i) ydot[((s0 + j) * D + i) * O + o] = col[(1 + i) * m + j];
                    if (d2)
                        for (std::size_t k = 0; k < K; ++k) d2[((s0 + j) * K + k) * O + o] = col[(1 + D + k) * m + j];
                }
        });
    }

    // The loss sum_s residual(...) * weight / n over n points (x: n rows of in_size, sample-major) and
    // its parameter gradient, ADDED into g (so several terms, e.g. interior and boundary, add up).
    // Chunks are grouped and summed in an order that depends on n only: the same bits on any thread count.
    template <class R>
        requires ResidualFunctor<R, T>
    T add_value_and_gradient(const T* p, T* g, const T* x, std::size_t n, const R& residual, T weight = T(1),
                             int threads = 1) {
        require_input_tangents("add_value_and_gradient");
        if (n == 0) return T(0);
        threads = resolve_threads(threads);
        reserve(n, threads);
        const T scale = weight / static_cast<T>(n);
        const std::size_t chunks = num_chunks(n), per = chunks_per_group(n), groups = num_groups(n);
        auto partial = [&](std::size_t slot) { return partial_.data() + slot * Net::num_params; };
        parallel_for_ordered(
            groups, threads,
            [&](std::size_t gi, int tid, std::size_t slot) {
                Scratch& s = scratch_[static_cast<std::size_t>(tid)];
                T* part = partial(slot);
                std::fill_n(part, Net::num_params, T(0));
                T l = 0;
                for (std::size_t c = gi * per; c < std::min(chunks, (gi + 1) * per); ++c) {
                    const std::size_t s0 = c * chunk_, m = std::min(chunk_, n - s0);
                    load_inputs(s, x, nullptr, s0, m);
                    forward(p, s, m);
                    std::fill_n(s.ybar, Net::out_size * C_ * m, T(0));
                    PointDerivatives<T> d{m, s0, Net::in_size, Net::out_size, spec_.tangents, spec_.second.size(), s.x, s.out};
                    PointCotangents<T> cot{m, Net::out_size, spec_.tangents, spec_.second.size(), s.ybar};
                    l += static_cast<T>(residual(d, cot, scale));
                    pullback(p, part, s, m);
                }
                losses_[gi] = l;
            },
            [&](std::size_t, std::size_t slot) { kernels::add_to(g, partial(slot), Net::num_params); });
        T total = 0;
        for (std::size_t i = 0; i < groups; ++i) total += losses_[i];
        return total * scale;
    }

    // The same three calls on spans, their sizes checked as value_and_gradient checks its buffers (one
    // std::invalid_argument naming the call and the buffer): n is x's number of rows (a positive whole
    // number of in_size values); p holds num_params values; out n * out_size * C; v n * tangents * in_size,
    // y n * out_size, ydot n * tangents * out_size, d2 empty (not wanted) or n * K * out_size; g num_params.
    void derivatives(std::span<const T> p, std::span<const T> x, std::span<T> out, int threads = 1) {
        constexpr const char* where = "DerivativeWorkspace::derivatives";
        const std::size_t n = checked_rows(where, p, x, threads);
        detail::expect_size(where, "the output buffer (n x out_size x columns)", n * Net::out_size * C_, out.size());
        derivatives(p.data(), x.data(), out.data(), n, threads);
    }
    void jvp(std::span<const T> p, std::span<const T> x, std::span<const T> v, std::span<T> y, std::span<T> ydot,
             int threads = 1, std::span<T> d2 = {}) {
        constexpr const char* where = "DerivativeWorkspace::jvp";
        const std::size_t n = checked_rows(where, p, x, threads);
        const std::size_t D = spec_.tangents, K = spec_.second.size();
        detail::expect_size(where, "the directions v (n x tangents x in_size)", n * D * Net::in_size, v.size());
        detail::expect_size(where, "the output y (n x out_size)", n * Net::out_size, y.size());
        detail::expect_size(where, "the tangent output ydot (n x tangents x out_size)", n * D * Net::out_size,
                            ydot.size());
        if (!d2.empty())
            detail::expect_size(where, "the second-derivative output d2 (n x second x out_size)",
                                n * K * Net::out_size, d2.size());
        jvp(p.data(), x.data(), v.data(), y.data(), ydot.data(), n, threads, d2.empty() ? nullptr : d2.data());
    }
    template <class R>
        requires ResidualFunctor<R, T>
    T add_value_and_gradient(std::span<const T> p, std::span<T> g, std::span<const T> x, const R& residual,
                             T weight = T(1), int threads = 1) {
        constexpr const char* where = "DerivativeWorkspace::add_value_and_gradient";
        const std::size_t n = checked_rows(where, p, x, threads);
        detail::expect_size(where, "the gradient buffer", Net::num_params, g.size());
        return add_value_and_gradient(p.data(), g.data(), x.data(), n, residual, weight, threads);
    }

private:
    struct Scratch {
        aligned_vector<T> buf;
        T* x = nullptr;      // in_size x chunk (plain inputs, for the residual)
        T* in = nullptr;     // in_size x C x chunk: the input columns
        T* out = nullptr;    // out_size x C x chunk: the output columns
        T* ybar = nullptr;   // out_size x C x chunk: their cotangents (the pullback clobbers them)
        T* saved = nullptr;  // Rule::saved x C x chunk (the activations and pre-activations inside)
        T* work = nullptr;   // Rule::scratch x C x chunk (the pullback's inner cotangents)
        std::size_t capacity = 0;

        void reserve(std::size_t in_size, std::size_t C, std::size_t chunk) {
            if (chunk <= capacity) return;
            const std::size_t sizes[] = {in_size * chunk, Net::in_size * C * chunk, Net::out_size * C * chunk,
                                         Net::out_size * C * chunk, Rule::saved * C * chunk, Rule::scratch * C * chunk};
            std::size_t total = 0;
            for (auto z : sizes) total += round_up16(z);
            buf.assign(total, T(0));
            T* q = buf.data();
            T** ptrs[] = {&x, &in, &out, &ybar, &saved, &work};
            for (std::size_t i = 0; i < 6; ++i) {
                *ptrs[i] = q;
                q += round_up16(sizes[i]);
            }
            capacity = chunk;
        }
    };

    std::size_t checked_rows(const char* where, std::span<const T> p, std::span<const T> x, int threads) const {
        detail::check_threads(where, threads);
        detail::expect_size(where, "the parameter buffer", Net::num_params, p.size());
        return detail::count_rows(where, x.size(), Net::in_size);
    }

    void require_input_tangents(const char* where) const {
        if (spec_.tangents != 0 && spec_.tangents != Net::in_size)
            throw std::invalid_argument(std::string(where) + ": the spec has " + std::to_string(spec_.tangents) +
                                         " tangents; input derivatives need none or one per input coordinate (" +
                                        std::to_string(Net::in_size) + ")");
    }

    // s.in for samples [s0, s0 + m): values, tangents (unit vectors, or the rows of v), second columns 0.
    void load_inputs(Scratch& s, const T* x, const T* v, std::size_t s0, std::size_t m) const {
        constexpr std::size_t F = Net::in_size;
        const std::size_t D = spec_.tangents;
        for (std::size_t f = 0; f < F; ++f) {
            T* row = s.in + f * C_ * m;
            for (std::size_t j = 0; j < m; ++j) s.x[f * m + j] = row[j] = x[(s0 + j) * F + f];
            for (std::size_t i = 0; i < D; ++i)
                for (std::size_t j = 0; j < m; ++j)
                    row[(1 + i) * m + j] = v ? v[((s0 + j) * D + i) * F + f] : T(i == f ? 1 : 0);
            std::fill_n(row + (1 + D) * m, spec_.second.size() * m, T(0));
        }
    }

    JetColumns columns() const { return {spec_.tangents, C_, spec_.second, containing_}; }

    void forward(const T* p, Scratch& s, std::size_t m) const { Rule::forward(p, s.in, s.out, s.saved, m, columns()); }

    // s.ybar holds the cotangent of the output columns; adds the parameter gradient into g.
    void pullback(const T* p, T* g, Scratch& s, std::size_t m) const {
        Rule::pullback(p, g, static_cast<const T*>(s.in), static_cast<const T*>(s.saved), s.work, s.ybar,
                       static_cast<T*>(nullptr), m, columns());
    }

    DerivativeSpec spec_;
    std::vector<std::vector<std::size_t>> containing_;  // see JetColumns
    std::size_t C_ = 1, chunk_ = 16;
    std::vector<Scratch> scratch_;
    aligned_vector<T> partial_;
    std::vector<T> losses_;
};

}  // namespace chainlet
