// Workspace<Net, T>: every buffer a forward pass, a gradient or a prediction needs, allocated once.
//
// A batch is cut into chunks of at most `chunk` samples (a constant of the chain and the element type,
// sized so a chunk's activations stay in the L2 cache), as equal as multiples of 16 allow (chunk_size),
// and the chunks into at most 32 groups of consecutive chunks. Groups run on OpenMP threads, each on
// its thread's scratch; a group adds its chunks' gradients in order into a partial gradient (one of
// twice as many as threads), which is then added into g in group order (parallel_for_ordered). The
// chunking, the grouping and the order of every sum depend on the batch size alone, never on the thread
// count, so the same inputs give the same bits with any number of threads.
//
// A workspace is not shared between concurrent callers; each thread that calls the library brings its
// own (the convenience functions in train.hpp keep one per thread).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/kernels/simd.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/losses.hpp"
#include "chainlet/memory.hpp"
#include "chainlet/parallel.hpp"

namespace chainlet {

// Where a workspace reads its input rows: values of type S, converted to T as is (S = T) or as
// v * scale + offset (e.g. bytes of an image). See ByteData in train.hpp.
template <class T, class S = T>
struct InputRows {
    const S* data;
    T scale = T(1), offset = T(0);

    void gather(std::size_t F, std::size_t first, const std::uint32_t* index, std::size_t n, T* dst) const {
        const S* src = data + (index ? 0 : first * F);
        if constexpr (std::is_same_v<S, T>)
            kernels::gather_transpose(src, F, index, n, dst);
        else
            kernels::gather_transpose(src, F, index, n, dst, [this](S v) { return static_cast<T>(v) * scale + offset; });
    }
    // The chunk's inputs, feature-major: one sample of T is its own feature-major chunk and is read where
    // it is; otherwise gathered (and converted) into dst.
    const T* chunk(std::size_t F, std::size_t first, const std::uint32_t* index, std::size_t n, T* dst) const {
        if constexpr (std::is_same_v<S, T>)
            if (n == 1) return data + static_cast<std::size_t>(index ? *index : first) * F;
        gather(F, first, index, n, dst);
        return dst;
    }
    // Samples [first, first + n) of the batch (rows index[0..n) if index is given, as in chunk) as a feature-major
    // chunk of np >= n samples, the last np - n of which repeat the chunk's last sample (Workspace pads
    // chunks to whole vectors). rows: np entries, left holding the rows read, relative to
    // data + (index ? 0 : first * F), so that the same rows of another array (targets) can be gathered.
    const T* padded_chunk(std::size_t F, std::size_t first, const std::uint32_t* index, std::size_t n, std::size_t np,
                          std::uint32_t* rows, T* dst) const {
        for (std::size_t s = 0; s < np; ++s) {
            const std::size_t r = std::min(s, n - 1);
            rows[s] = index ? index[r] : static_cast<std::uint32_t>(r);
        }
        InputRows from_first = *this;
        if (!index) from_first.data += first * F;
        from_first.gather(F, 0, rows, np, dst);
        return dst;
    }
};

namespace detail {

// The buffers of a forward pass and its pullback through the network Net (a bound layer, see
// chain.hpp) for up to `capacity` samples, carved from one allocation: its input x and output y, its
// saved and scratch storage, the output cotangent dy and the input cotangent dx. Moves keep the
// pointers valid (the storage moves with buf); copies would not, so there are none.
template <class Net, class T>
struct ChainBuffers {
    // Values per sample, in the order they are carved.
    static constexpr std::array<std::size_t, 6> per_sample = {Net::in_size,  Net::out_size, Net::saved_per_sample,
                                                              Net::scratch_per_sample, Net::out_size, Net::in_size};
    aligned_vector<T> buf;
    T *x = nullptr, *y = nullptr, *saved = nullptr, *scratch = nullptr, *dy = nullptr, *dx = nullptr;
    std::size_t capacity = 0;

    ChainBuffers() = default;
    ChainBuffers(const ChainBuffers&) = delete;
    ChainBuffers& operator=(const ChainBuffers&) = delete;
    ChainBuffers(ChainBuffers&&) noexcept = default;
    ChainBuffers& operator=(ChainBuffers&&) noexcept = default;

    void reserve(std::size_t m) {
        if (m <= capacity) return;
        std::size_t total = 0;
        for (auto v : per_sample) total += round_up16(v * m);
        buf.assign(total, T(0));
        T* q = buf.data();
        T** const slots[] = {&x, &y, &saved, &scratch, &dy, &dx};
        for (std::size_t i = 0; i < per_sample.size(); ++i) {
            *slots[i] = q;
            q += round_up16(per_sample[i] * m);
        }
        capacity = m;
    }
};

}  // namespace detail

template <class Net, class T>
class Workspace {
public:
    static constexpr std::size_t bytes_per_sample = sizeof(T) * [] {
        std::size_t s = 0;
        for (auto v : detail::ChainBuffers<Net, T>::per_sample) s += v;
        return s;
    }();
    // Samples per chunk: about chunk_bytes of activations, between 16 and 1024; a multiple of 64 (4 float
    // vectors of AVX-512, the width of a full register tile along the samples) where 64 fit, else of 16.
    // Fewer, longer chunks pay fewer of the kernels' per-call costs (gemm_nt's horizontal sums, tile
    // set-up) while the chunk stays in L2 (docs/profile.md). LeNet5 (83 KB per sample) stays at 16, as 32
    // or 64 were no faster.
    // 512 KiB (half a 1 MiB L2) where vectors are 512 bits: the AVX-512 cores measured have 1 MiB (Zen 4)
    // to 2 MiB (Intel Xeons) of L2 per core. An AVX2 build keeps 384 KiB: a Zen 3 has 512 KiB of L2,
    // which 512 KiB of activations would fill.
    static constexpr std::size_t chunk_bytes = simd::width<float> * sizeof(float) == 64 ? 512 * 1024 : 384 * 1024;
    static constexpr std::size_t chunk = [] {
        const std::size_t fit = chunk_bytes / bytes_per_sample;
        return fit >= 64 ? std::min<std::size_t>(fit / 64 * 64, 1024) : std::max<std::size_t>(fit / 16 * 16, 16);
    }();
    // A batch's chunks are split into at most this many groups of consecutive chunks; each group is
    // one unit of parallel work whose gradient is added into g once (fewer groups: fewer passes over
    // the gradient; enough of them to keep 32 threads busy).
    static constexpr std::size_t max_groups = 32;

    Workspace() = default;
    explicit Workspace(std::size_t batch, int threads = 0) { reserve(batch, threads); }

    // Allocates for batches of up to `batch` samples on up to `threads` threads (0: all). Calls with
    // larger batches or more threads grow the workspace; calls within these bounds never allocate.
    void reserve(std::size_t batch, int threads = 0) {
        threads = resolve_threads(threads);
        // A chunk of more than one sample runs padded to whole vectors (chunk is a multiple of 16); a batch
        // of up to one_by_one samples needs one sample's buffers.
        const std::size_t per_chunk = batch <= std::max<std::size_t>(one_by_one, 1) ? 1 : std::min(padded_size(batch), chunk);
        if (scratch_.size() < static_cast<std::size_t>(threads)) scratch_.resize(static_cast<std::size_t>(threads));
        for (auto& s : scratch_) {
            s.reserve(per_chunk);
            if (s.loss_buf.size() < 2 * Net::out_size * per_chunk) s.loss_buf.assign(2 * Net::out_size * per_chunk, T(0));
        }
        // One partial gradient per slot of parallel_for_ordered (twice the threads; added into g group by
        // group, in order), not one per group.
        const std::size_t groups = num_groups(batch), partials = ordered_slots(groups, threads);
        if (groups > 1 && partial_.size() < partials * Net::num_params) partial_.resize(partials * Net::num_params);
    }

    // Batches of 2 to one_by_one samples run one sample at a time through the layers' one-sample paths
    // (the quarter of a vector: 4 floats with AVX-512, 2 with AVX2 or doubles with AVX-512; none for
    // AVX2 doubles): a padded chunk costs as much as a whole vector of samples, which is 6 to 9 single
    // samples' time with AVX-512 floats (docs/profile.md). Such a sample gets the bits it gets alone, not
    // those of a larger batch.
    static constexpr std::size_t one_by_one = simd::width<T> / 4;
    // The samples a chunk of m runs with: two or more are padded to whole vectors (see predict).
    static std::size_t padded_size(std::size_t m) {
        constexpr std::size_t w = simd::width<T>;
        return m > 1 ? (m + w - 1) / w * w : m;
    }
    // Samples per chunk in a batch of n: the fewest chunks of at most `chunk` samples, made equal up to a
    // multiple of 16 (one AVX-512 float vector), so that threads taking whole chunks get equal work.
    // With chunks of 768, 10,000 samples of the tiny MLP are 13 chunks of 720 and one of 640 (5,040 and
    // 4,960 samples on 2 threads), not 13 of 768 and one of 16 (5,376 and 4,624).
    // No chunk is empty: (chunks - 1) size <= (chunks - 1) chunk < n <= chunks size. The sizes are
    // multiples of 16, not of 64: the tiny MLP's step on 1 thread took the same time with 560 (three
    // single-vector tiles at the end of a row) as with 576. A batch of one chunk pays no division here:
    // a division would be a noticeable part of a one-sample call.
    static std::size_t num_chunks(std::size_t n) { return (n + chunk - 1) / chunk; }
    static std::size_t chunk_size(std::size_t n) {
        const std::size_t chunks = num_chunks(n);
        if (chunks <= 1) return chunk;
        return std::min(chunk, ((n + chunks - 1) / chunks + 15) / 16 * 16);
    }
    static std::size_t chunks_per_group(std::size_t n) { return (num_chunks(n) + max_groups - 1) / max_groups; }
    static std::size_t num_groups(std::size_t n) {
        if (n <= chunk) return 1;  // no division for the one-sample call
        return (num_chunks(n) + chunks_per_group(n) - 1) / chunks_per_group(n);
    }

    // Mean loss over the n samples and its gradient, written to g (overwritten, not accumulated).
    // x: n rows of Net::in_size, y: n rows of the loss's targets, both sample-major; row s of the batch
    // is row index[s] of x and y (or row s if index is null). Sizes are the caller's to check.
    // (x and y point at the whole data set when index is given, at the batch otherwise.)
    // pass: what the layers see of the step (layer.hpp); each chunk gets it with first_sample advanced by
    // the chunk's offset in the batch (pass.first_sample: where these n samples start in the whole batch,
    // which fit sets when MPI ranks share a batch).
    template <class L, class S = T>
    T value_and_gradient(const T* p, T* g, InputRows<T, S> x, const typename L::template target<T>* y,
                         const std::uint32_t* index, std::size_t n, const L& loss, int threads = 1,
                         Pass pass = {.training = true}) {
        using target_t = typename L::template target<T>;
        threads = resolve_threads(threads);
        reserve(n, threads);
        const std::size_t chunks = num_chunks(n), size = chunk_size(n);
        const std::size_t tps = L::targets_per_sample(Net::out_size);
        // Every thread's target buffer now, not when the thread first gets a chunk: a thread that got no
        // chunk in the first call would otherwise allocate in a later one.
        for (int t = 0; t < threads; ++t) scratch_[static_cast<std::size_t>(t)].template targets<target_t>(tps * chunk);
        const T scale = T(1) / static_cast<T>(n);
        // gc: g (writes it) or a partial gradient (adds into it). A chunk of two or more samples that does
        // not fill whole vectors runs padded, as in predict, with copies of its last sample whose output
        // cotangent is zero: a pullback is linear in dy, so they add exact zeros to every sum.
        auto run_chunk = [&](std::size_t s0, std::size_t m, int tid, T* gc, bool write_g) {
            Scratch& s = scratch_[static_cast<std::size_t>(tid)];
            const std::size_t mp = padded_size(m);
            const std::uint32_t* idx = index ? index + s0 : nullptr;
            // The targets go to the loss unpadded; one sample's are read where they are.
            const target_t* t = y + (idx ? *idx : s0) * tps;
            const target_t* const y_rows = y + (index ? 0 : s0 * tps);
            target_t* const chunk_targets = s.template targets<target_t>(tps * chunk);
            const T* xc;
            if (mp == m) {
                xc = x.chunk(Net::in_size, s0, idx, m, s.x);
                if (m > 1) kernels::gather_transpose(y_rows, tps, idx, m, chunk_targets);
            } else {
                std::uint32_t rows[chunk];
                xc = x.padded_chunk(Net::in_size, s0, idx, m, mp, rows, s.x);
                kernels::gather_transpose(y_rows, tps, rows, m, chunk_targets);
            }
            if (m > 1) t = chunk_targets;
            Pass chunk_pass = pass;
            chunk_pass.first_sample = pass.first_sample + s0;
            Net::forward(p, xc, s.y, s.saved, mp, chunk_pass);
            T l;
            if (mp == m) {
                l = loss.template value_and_gradient<T>(s.y, t, s.dy, Net::out_size, m, scale);
            } else {
                // The loss sees the m samples only: their outputs packed to a stride of m, the cotangent
                // spread back to the padded stride with zeros for the copies.
                T* const y_packed = s.loss_buf.data();
                T* const dy_packed = y_packed + Net::out_size * m;
                for (std::size_t f = 0; f < Net::out_size; ++f) std::copy_n(s.y + f * mp, m, y_packed + f * m);
                l = loss.template value_and_gradient<T>(y_packed, t, dy_packed, Net::out_size, m, scale);
                for (std::size_t f = 0; f < Net::out_size; ++f) {
                    std::copy_n(dy_packed + f * m, m, s.dy + f * mp);
                    std::fill(s.dy + f * mp + m, s.dy + (f + 1) * mp, T(0));
                }
            }
            T* const no_dx = nullptr;
            if (write_g) Net::pullback_assign(p, gc, xc, s.y, s.saved, s.scratch, s.dy, no_dx, mp);
            else Net::pullback(p, gc, xc, s.y, s.saved, s.scratch, s.dy, no_dx, mp);
            return l;
        };
        const auto run_chunk_number = [&](std::size_t c, int tid, T* gc, bool write_g) {
            return run_chunk(c * size, std::min(size, n - c * size), tid, gc, write_g);
        };
        // A batch of a few samples runs them one at a time, in order, on this thread (see one_by_one).
        if (n > 1 && n <= one_by_one) {
            T l = 0;
            for (std::size_t i = 0; i < n; ++i) l += run_chunk(i, 1, 0, g, i == 0);
            return l * scale;
        }
        // One chunk writes g (pullback_assign): for one sample, zeroing g first and adding into it cost its
        // stores twice and a reload of every value.
        if (chunks == 1) return run_chunk_number(0, 0, g, true) * scale;
        std::fill_n(g, Net::num_params, T(0));
        // Group i holds chunks [i * per, (i + 1) * per) and sums them in order into a partial (the slot
        // parallel_for_ordered gives it); g = (0 + partial of group 0) + partial of group 1 + ..., in
        // group order. Both orders depend on n only.
        const std::size_t per = chunks_per_group(n), groups = num_groups(n);
        T losses[max_groups];
        auto partial = [&](std::size_t slot) { return partial_.data() + slot * Net::num_params; };
        parallel_for_ordered(
            groups, threads,
            [&](std::size_t i, int tid, std::size_t slot) {
                // The group's first chunk writes the partial (pullback_assign), the others add to it.
                T l = 0;
                for (std::size_t c = i * per; c < std::min(chunks, (i + 1) * per); ++c)
                    l += run_chunk_number(c, tid, partial(slot), c == i * per);
                losses[i] = l;
            },
            [&](std::size_t, std::size_t slot) { kernels::add_to(g, partial(slot), Net::num_params); });
        T total = 0;
        for (std::size_t i = 0; i < groups; ++i) total += losses[i];
        return total * scale;
    }

    // out: n rows of Net::out_size, sample-major.
    //
    // A chunk of more than one sample whose size is not a multiple of the vector width runs padded to
    // whole vectors, the padding repeating its last sample: the kernels' scalar tails cost about as much
    // per sample as a whole vector of samples (docs/profile.md). A sample's outputs do not depend on its
    // chunk's other samples. A batch of
    // 2 to one_by_one samples runs them one at a time instead.
    template <class S = T>
    void predict(const T* p, InputRows<T, S> x, T* out, std::size_t n, int threads = 1) {
        threads = resolve_threads(threads);
        reserve(n, threads);
        // Samples [s0, s0 + m) on thread tid's scratch.
        auto run_chunk = [&](std::size_t s0, std::size_t m, int tid) {
            Scratch& s = scratch_[static_cast<std::size_t>(tid)];
            const std::size_t mp = padded_size(m);
            const T* xc;
            if (mp == m) {
                xc = x.chunk(Net::in_size, s0, nullptr, m, s.x);
            } else {
                std::uint32_t rows[chunk];
                xc = x.padded_chunk(Net::in_size, s0, nullptr, m, mp, rows, s.x);
            }
            // The output goes through s.y, also for one sample: written straight into out, an out
            // overlapping this sample's input (predict(p, x, x) of a one-layer chain) would be read
            // after being written.
            Net::forward(p, xc, s.y, s.saved, mp, Pass{.first_sample = s0});
            if (m == 1) std::copy_n(s.y, Net::out_size, out + s0 * Net::out_size);
            else kernels::scatter_transpose(s.y, Net::out_size, m, out + s0 * Net::out_size, mp);
        };
        // A batch of a few samples runs them one at a time on this thread (see one_by_one): on 2 threads the
        // fork and join would cost more than the samples' work.
        if (n > 1 && n <= one_by_one) {
            for (std::size_t i = 0; i < n; ++i) run_chunk(i, 1, 0);
            return;
        }
        const std::size_t size = chunk_size(n);
        parallel_for(num_chunks(n), threads,
                     [&](std::size_t c, int tid) { run_chunk(c * size, std::min(size, n - c * size), tid); });
    }

private:
    // One thread's buffers for one chunk (see detail::ChainBuffers) and the chunk's targets.
    struct Scratch : detail::ChainBuffers<Net, T> {
        aligned_vector<std::byte> target_buf;
        // A padded training chunk's outputs and output cotangent, packed for the loss (value_and_gradient).
        aligned_vector<T> loss_buf;

        template <class U>
        U* targets(std::size_t count) {
            if (target_buf.size() < count * sizeof(U)) target_buf.resize(count * sizeof(U));
            return reinterpret_cast<U*>(target_buf.data());
        }
    };

    std::vector<Scratch> scratch_;
    aligned_vector<T> partial_;
};

}  // namespace chainlet
