// Input derivatives of a network in one forward pass, and the pullback of a loss of them to the
// parameters (physics-informed training, issue 14). No tape: every layer's rule is written out.
//
// For a chunk of n samples the pass carries C = 1 + D + K columns per feature (feature-major,
// element [f][c][s] at f * C n + c n + s, so one matrix product moves all columns of a layer):
//   column 0          the value a
//   columns 1 .. D    tangents a_i = da/dt_i (the input derivatives d/dx_i, or the caller's directions)
//   columns 1+D+k     second derivatives a_S = sum_{i in S_k} d2a/dt_i^2 (S_k = {i}: a Hessian diagonal
//                     entry; S_k = all: the Laplacian)
// Through Dense<N, Act> (z = W a + b, y = f(z)):
//   z = W a + b,  z_i = W a_i,  z_S = W a_S
//   y = f(z),     y_i = f'(z) z_i,  y_S = f''(z) sum_{i in S} z_i^2 + f'(z) z_S
// Pullback (the reverse of those rules, needs f'''), from the cotangents ybar of every column:
//   zbar   = ybar f' + sum_i ybar_i f'' z_i + sum_S ybar_S (f''' sum_{i in S} z_i^2 + f'' z_S)
//   zbar_i = ybar_i f' + sum_{S contains i} 2 ybar_S f'' z_i
//   zbar_S = ybar_S f'
//   Wbar += zbar_all a_all^T (every column),  bbar += sum_s zbar,  abar = W^T zbar (every column).
// Only chains of Dense layers are supported (containers and convolutions are not, see docs/api.md).
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "chainlet/activations.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/kernels/gemm.hpp"
#include "chainlet/kernels/vector_loop.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/memory.hpp"
#include "chainlet/parallel.hpp"

namespace chainlet {

// A bound layer the input-derivative pass can go through: Dense (it exposes its activation and bias).
template <class L>
concept TaylorDense = requires {
    typename L::activation;
    { L::has_bias } -> std::convertible_to<bool>;
    { L::num_weights } -> std::convertible_to<std::size_t>;
    { L::activation::template jet<double>(0.0) };
};

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

namespace detail {

// The Dense rules of the header comment on one layer. z, y, zbar: Out x C x n.
template <class Act, class T>
struct DenseJetRule {
    // y and its columns from z (z already holds W a + b in every column).
    static void forward(const T* z, T* y, std::size_t out, std::size_t n, std::size_t D,
                        const std::vector<std::vector<std::size_t>>& second) {
        const std::size_t C = 1 + D + second.size(), stride = C * n;
        for (std::size_t o = 0; o < out; ++o) {
            const T* zo = z + o * stride;
            T* yo = y + o * stride;
            kernels::vectors_then_scalars<T>(n, [&]<class V>(std::size_t s) {
                const Jet<V> j = Act::jet(simd::loadv<V>(zo + s));
                simd::storev(yo + s, j.value);
                for (std::size_t i = 0; i < D; ++i) simd::storev(yo + (1 + i) * n + s, j.d1 * simd::loadv<V>(zo + (1 + i) * n + s));
                for (std::size_t k = 0; k < second.size(); ++k) {
                    V sq(0);
                    for (auto i : second[k]) {
                        const V zi = simd::loadv<V>(zo + (1 + i) * n + s);
                        sq = simd::fma(zi, zi, sq);
                    }
                    const std::size_t c = (1 + D + k) * n + s;
                    simd::storev(yo + c, simd::fma(j.d2, sq, j.d1 * simd::loadv<V>(zo + c)));
                }
            });
        }
    }
    // ybar (in place) becomes zbar.
    // containing[i]: the second-derivative columns k whose set holds tangent i.
    static void pullback(const T* z, T* ybar, std::size_t out, std::size_t n, std::size_t D,
                         const std::vector<std::vector<std::size_t>>& second,
                         const std::vector<std::vector<std::size_t>>& containing) {
        const std::size_t C = 1 + D + second.size(), stride = C * n, K = second.size();
        for (std::size_t o = 0; o < out; ++o) {
            const T* zo = z + o * stride;
            T* bo = ybar + o * stride;
            kernels::vectors_then_scalars<T>(n, [&]<class V>(std::size_t s) {
                const Jet<V> j = Act::jet(simd::loadv<V>(zo + s));
                V z0bar = simd::loadv<V>(bo + s) * j.d1;
                for (std::size_t i = 0; i < D; ++i)
                    z0bar = simd::fma(simd::loadv<V>(bo + (1 + i) * n + s) * j.d2, simd::loadv<V>(zo + (1 + i) * n + s), z0bar);
                for (std::size_t k = 0; k < K; ++k) {
                    const std::size_t c = (1 + D + k) * n + s;
                    V sq(0);
                    for (auto i : second[k]) {
                        const V zi = simd::loadv<V>(zo + (1 + i) * n + s);
                        sq = simd::fma(zi, zi, sq);
                    }
                    z0bar = simd::fma(simd::loadv<V>(bo + c), simd::fma(j.d3, sq, j.d2 * simd::loadv<V>(zo + c)), z0bar);
                }
                // zbar_i = ybar_i f' + 2 f'' z_i sum_{S_k contains i} ybar_S
                for (std::size_t i = 0; i < D; ++i) {
                    V w(0);
                    for (auto k : containing[i]) w += simd::loadv<V>(bo + (1 + D + k) * n + s);
                    const std::size_t c = (1 + i) * n + s;
                    simd::storev(bo + c, simd::fma(simd::loadv<V>(bo + c), j.d1,
                                                   V(2) * j.d2 * w * simd::loadv<V>(zo + c)));
                }
                for (std::size_t k = 0; k < K; ++k) {
                    const std::size_t c = (1 + D + k) * n + s;
                    simd::storev(bo + c, simd::loadv<V>(bo + c) * j.d1);
                }
                simd::storev(bo + s, z0bar);
            });
        }
    }
};

}  // namespace detail

// The input-derivative pass of the chain Net (Dense layers only) for element type T, with its buffers
// for up to `batch` samples on `threads` threads, allocated once (calls within these bounds allocate
// nothing). Chunking and grouping as in Workspace (workspace.hpp): the same bits on any thread count.
template <class Net, class T>
class DerivativeWorkspace {
public:
    static constexpr std::size_t L = Net::num_layers;
    static constexpr std::size_t max_groups = 32;

    DerivativeWorkspace(DerivativeSpec spec, std::size_t batch, int threads = 0) : spec_(std::move(spec)) {
        static_assert([]<std::size_t... I>(std::index_sequence<I...>) {
            return (TaylorDense<typename Net::template layer<I>> && ...);
        }(std::make_index_sequence<L>{}),
                      "chainlet: the input-derivative pass (derivatives/taylor.hpp) supports chains of Dense layers only");
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
        for (std::size_t l = 0; l <= L; ++l) per_sample += 2 * Net::width[l] * C_ * sizeof(T);
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
        const std::size_t groups = num_groups(batch);
        if (partial_.size() < groups * Net::num_params) partial_.resize(groups * Net::num_params);
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
            const T* y = s.act[L];
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
            const T* out = s.act[L];
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
        parallel_for(groups, threads, [&](std::size_t gi, int tid) {
            Scratch& s = scratch_[static_cast<std::size_t>(tid)];
            T* part = partial_.data() + gi * Net::num_params;
            std::fill_n(part, Net::num_params, T(0));
            T l = 0;
            for (std::size_t c = gi * per; c < std::min(chunks, (gi + 1) * per); ++c) {
                const std::size_t s0 = c * chunk_, m = std::min(chunk_, n - s0);
                load_inputs(s, x, nullptr, s0, m);
                forward(p, s, m);
                std::fill_n(s.bar[0], Net::out_size * C_ * m, T(0));
                PointDerivatives<T> d{m, s0, Net::in_size, Net::out_size, spec_.tangents, spec_.second.size(), s.x, s.act[L]};
                PointCotangents<T> cot{m, Net::out_size, spec_.tangents, spec_.second.size(), s.bar[0]};
                l += static_cast<T>(residual(d, cot, scale));
                pullback(p, part, s, m);
            }
            losses_[gi] = l;
        });
        T total = 0;
        for (std::size_t i = 0; i < groups; ++i) {
            total += losses_[i];
            kernels::add_to(g, partial_.data() + i * Net::num_params, Net::num_params);
        }
        return total * scale;
    }

private:
    struct Scratch {
        aligned_vector<T> buf;
        T* x = nullptr;             // in_size x chunk (plain inputs, for the residual)
        std::array<T*, L + 1> act{};  // act[l]: width[l] x C x chunk, the input of layer l (act[L]: the output)
        std::array<T*, L + 1> pre{};  // pre[l + 1]: z of layer l
        std::array<T*, 2> bar{};      // cotangents, max_width x C x chunk each
        std::size_t capacity = 0;

        void reserve(std::size_t in, std::size_t C, std::size_t chunk) {
            const std::size_t need = chunk;
            if (need <= capacity) return;
            std::size_t total = round_up16(in * chunk);
            for (std::size_t l = 0; l <= L; ++l) total += 2 * round_up16(Net::width[l] * C * chunk);
            total += 2 * round_up16(Net::max_width * C * chunk);
            buf.assign(total, T(0));
            T* q = buf.data();
            x = q;
            q += round_up16(in * chunk);
            for (std::size_t l = 0; l <= L; ++l) {
                act[l] = q;
                q += round_up16(Net::width[l] * C * chunk);
                pre[l] = q;
                q += round_up16(Net::width[l] * C * chunk);
            }
            for (auto& b : bar) {
                b = q;
                q += round_up16(Net::max_width * C * chunk);
            }
            capacity = need;
        }
    };

    void require_input_tangents(const char* where) const {
        if (spec_.tangents != 0 && spec_.tangents != Net::in_size)
            throw std::invalid_argument(std::string(where) + ": the spec has " + std::to_string(spec_.tangents) +
                                         " tangents; input derivatives need none or one per input coordinate (" +
                                        std::to_string(Net::in_size) + ")");
    }

    // act[0] for samples [s0, s0 + m): values, tangents (unit vectors, or the rows of v), second columns 0.
    void load_inputs(Scratch& s, const T* x, const T* v, std::size_t s0, std::size_t m) const {
        constexpr std::size_t F = Net::in_size;
        const std::size_t D = spec_.tangents;
        for (std::size_t f = 0; f < F; ++f) {
            T* row = s.act[0] + f * C_ * m;
            for (std::size_t j = 0; j < m; ++j) s.x[f * m + j] = row[j] = x[(s0 + j) * F + f];
            for (std::size_t i = 0; i < D; ++i)
                for (std::size_t j = 0; j < m; ++j)
                    row[(1 + i) * m + j] = v ? v[((s0 + j) * D + i) * F + f] : T(i == f ? 1 : 0);
            std::fill_n(row + (1 + D) * m, spec_.second.size() * m, T(0));
        }
    }

    void forward(const T* p, Scratch& s, std::size_t m) const {
        const std::size_t N = C_ * m;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (([&] {
                 using Layer = typename Net::template layer<I>;
                 constexpr std::size_t In = Net::width[I], Out = Net::width[I + 1];
                 const T* w = p + Net::param_offset[I];
                 T* z = s.pre[I + 1];
                 kernels::gemm_nn<Identity, kernels::Init::zero>(Out, N, In, w, 1, Out, s.act[I], N, z, N);
                 if constexpr (Layer::has_bias) {
                     const T* b = w + Layer::num_weights;
                     for (std::size_t o = 0; o < Out; ++o)
                         for (std::size_t j = 0; j < m; ++j) z[o * N + j] += b[o];
                 }
                 detail::DenseJetRule<typename Layer::activation, T>::forward(z, s.act[I + 1], Out, m, spec_.tangents,
                                                                             spec_.second);
             }()),
             ...);
        }(std::make_index_sequence<L>{});
    }

    // s.bar[0] holds the cotangent of act[L]; adds the parameter gradient into g.
    void pullback(const T* p, T* g, Scratch& s, std::size_t m) const {
        const std::size_t N = C_ * m;
        [&]<std::size_t... R>(std::index_sequence<R...>) {
            (([&] {
                 constexpr std::size_t I = L - 1 - R;
                 using Layer = typename Net::template layer<I>;
                 constexpr std::size_t In = Net::width[I], Out = Net::width[I + 1];
                 const T* w = p + Net::param_offset[I];
                 T* gw = g + Net::param_offset[I];
                 T* zbar = s.bar[R % 2];
                 detail::DenseJetRule<typename Layer::activation, T>::pullback(s.pre[I + 1], zbar, Out, m, spec_.tangents,
                                                                              spec_.second, containing_);
                 // Wbar[i, o] += sum over every column of a[i, .] zbar[o, .]
                 kernels::gemm_nt(In, Out, N, s.act[I], N, zbar, N, gw, Out);
                 if constexpr (Layer::has_bias) kernels::row_sums_add(Out, m, zbar, N, gw + Layer::num_weights);
                 if constexpr (I > 0)
                     kernels::gemm_nn<Identity, kernels::Init::zero>(In, N, Out, w, Out, 1, zbar, N, s.bar[(R + 1) % 2], N);
             }()),
             ...);
        }(std::make_index_sequence<L>{});
    }

    DerivativeSpec spec_;
    std::vector<std::vector<std::size_t>> containing_;  // see DenseJetRule::pullback
    std::size_t C_ = 1, chunk_ = 16;
    std::vector<Scratch> scratch_;
    aligned_vector<T> partial_;
    std::vector<T> losses_;
};

}  // namespace chainlet
