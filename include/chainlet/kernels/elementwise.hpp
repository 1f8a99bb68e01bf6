// Element-wise and reduction loops: activation pullbacks, row sums (bias gradients), buffer sums
// (partial gradients), and the transposes between the user's sample-major data and the chain's
// feature-major chunks. Each is one template body run as a vector loop plus a scalar tail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "chainlet/kernels/simd.hpp"

namespace chainlet::kernels {

using std::size_t;
using simd::loadv;
using simd::storev;

// dy[i] <- Act::pullback(dy[i], s[i]), s the layer output or pre-activation; Act is any type with a
// static member template `V pullback(V dy, V s)`.
template <class Act, class T>
void activation_pullback(T* dy, const T* s, size_t n) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    size_t i = 0;
    if constexpr (simd::enabled)
        for (const size_t i_end = n - n % (W); i < i_end; i += W) Act::pullback(V::load_unaligned(dy + i), V::load_unaligned(s + i)).store_unaligned(dy + i);
    for (; i < n; ++i) dy[i] = Act::pullback(dy[i], s[i]);
}

template <class Act, class T>
void activation_pullback_reference(T* dy, const T* s, size_t n) {
    for (size_t i = 0; i < n; ++i) dy[i] = Act::pullback(dy[i], s[i]);
}

namespace detail {
// Rows of values for the kernels that use each value as it is made (row_sums_of below, gemm.hpp's
// nt_tile): make<V>(m, n) returns the vector (or scalar, V = T) at row m, column n, and stored(m, n) one
// value made before, which row_sums_of requires (keeps_made_values).
//
// As stored. The load is pinned (simd.hpp): in nt_tile each vector feeds several FMAs, and GCC 12
// would otherwise fold the load into each of them.
template <class T>
struct StoredRows {
    static constexpr bool keeps_made_values = true;
    const T* a;
    size_t lda;
    template <class V>
    V make(size_t m, size_t n) const { return simd::pinned(loadv<V>(a + m * lda + n)); }
    T stored(size_t m, size_t n) const { return a[m * lda + n]; }
};

// dz = Act::pullback(dy, s), written back to dy if store (dy and s with row stride ld). The loads are
// not pinned: each feeds one operation, and pinned they measured slightly slower in nt_tile and no faster
// in the row sums.
template <class Act, bool store, class T>
struct ActivationPullbackRows {
    static constexpr bool keeps_made_values = store;
    T* dy;
    const T* s;
    size_t ld;
    template <class V>
    V make(size_t m, size_t n) const {
        const V z = Act::pullback(loadv<V>(dy + m * ld + n), loadv<V>(s + m * ld + n));
        if constexpr (store) storev(dy + m * ld + n, z);
        return z;
    }
    T stored(size_t m, size_t n) const { return dy[m * ld + n]; }
};

// out[m] += the sum of row m of M rows of N values made by `rows`: in two alternating vector sums while
// two vectors remain, then one by one. Past the pairs, whole vectors are still made as vectors (an
// activation's vector and scalar forms may round differently) and then summed value by value. For
// StoredRows those makes have no effect and their result is unused, so the compiler drops them: the pin
// is a non-volatile asm (simd.hpp), removed with its unused output.
template <class T, class Rows>
inline void row_sums_of(size_t M, size_t N, Rows rows, T* out) {
    static_assert(Rows::keeps_made_values, "row_sums_of reads the last values of a row back with stored()");
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    const size_t pairs_end = simd::enabled && N >= 2 * W ? N - N % (2 * W) : 0;
    for (size_t m = 0; m < M; ++m) {
        T sum = 0;
        size_t n = 0;
        if constexpr (simd::enabled) {
            V s0(T(0)), s1(T(0));
            for (; n < pairs_end; n += 2 * W) {
                s0 += rows.template make<V>(m, n);
                s1 += rows.template make<V>(m, n + W);
            }
            if (pairs_end) sum = simd::hsum<T>(s0 + s1);
            for (; n + W <= N; n += W) rows.template make<V>(m, n);
        }
        for (; n < N; ++n) rows.template make<T>(m, n);
        for (n = pairs_end; n < N; ++n) sum += rows.stored(m, n);
        out[m] += sum;
    }
}
}  // namespace detail

// out[m] += sum_n a[m * lda + n]
template <class T>
void row_sums_add(size_t M, size_t N, const T* a, size_t lda, T* out) {
    detail::row_sums_of(M, N, detail::StoredRows<T>{a, lda}, out);
}

// activation_pullback on M rows of N values (row stride ld) and row_sums_add of the resulting dz into
// out. Rows of two vectors or more go in one pass over dy, which saves reading dz back (a Dense layer's
// bias gradient), with the bits of activation_pullback row by row and row_sums_add. Shorter rows are
// summed value by value, and those loads of a dz just stored wait for the store (slower for LeNet5's
// Dense layers at a chunk of 16), so there all of dz is made first: rows back to back (ld ==
// N) by one flat activation_pullback over M N values, as Dense's two passes did, whose vectors run
// across rows (for an activation whose scalar and vector forms round differently, exp-based ones, some
// of dz then differs in the last bits from a pullback row by row).
template <class Act, class T>
void activation_pullback_row_sums(size_t M, size_t N, T* dy, const T* s, size_t ld, T* out) {
    if (N < 2 * simd::width<T>) {
        if (ld == N) {
            activation_pullback<Act>(dy, s, M * N);
        } else {
            for (size_t m = 0; m < M; ++m) activation_pullback<Act>(dy + m * ld, s + m * ld, N);
        }
        row_sums_add(M, N, dy, ld, out);
        return;
    }
    detail::row_sums_of(M, N, detail::ActivationPullbackRows<Act, true, T>{dy, s, ld}, out);
}

template <class T>
void row_sums_add_reference(size_t M, size_t N, const T* a, size_t lda, T* out) {
    for (size_t m = 0; m < M; ++m) {
        T s = 0;
        for (size_t n = 0; n < N; ++n) s += a[m * lda + n];
        out[m] += s;
    }
}

// dst[i] += src[i]
template <class T>
void add_to(T* dst, const T* src, size_t n) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    size_t i = 0;
    if constexpr (simd::enabled)
        for (const size_t i_end = n - n % (W); i < i_end; i += W) (V::load_unaligned(dst + i) + V::load_unaligned(src + i)).store_unaligned(dst + i);
    for (; i < n; ++i) dst[i] += src[i];
}

// One row of outer_product, r[n] (+)= xm y[n] for n from `n` in vectors V as far as whole ones reach;
// returns where it stopped. A function, always inlined, where it was a lambda: in a large translation
// unit GCC kept the lambda out of line, with N unknown, and the one-sample forward + pullback took
// several times as long.
template <bool accumulate, class V, class T>
[[gnu::always_inline]] inline size_t outer_product_row(size_t n, size_t N, T xm, const T* y, T* r) {
    const V xv(xm);
    constexpr size_t L = simd::lanes<V>;
    for (const size_t n_end = N - (N - n) % L; n < n_end; n += L) {  // n <= N on entry
        if constexpr (accumulate) simd::storev(r + n, simd::fma(xv, simd::loadv<V>(y + n), simd::loadv<V>(r + n)));
        else simd::storev(r + n, xv * simd::loadv<V>(y + n));
    }
    return n;
}

// C[m, n] += x[m] y[n] (accumulate), or C[m, n] = x[m] y[n]: the weight gradient of one sample, an outer
// product, vectorised along n, with a half- and a quarter-width vector where they fit (a layer of 4 or 8
// outputs). Always inlined: with the layer's M and N known, the loops unroll and the vector widths that
// do not fit drop out.
template <bool accumulate, class T>
[[gnu::always_inline]] inline void outer_product(size_t M, size_t N, const T* x, const T* y, T* c, size_t ldc) {
    constexpr size_t W = simd::width<T>;
    for (size_t m = 0; m < M; ++m) {
        T* r = c + m * ldc;
        size_t n = 0;
        if constexpr (simd::enabled) {
            n = outer_product_row<accumulate, simd::vec<T>>(n, N, x[m], y, r);
            using H = simd::sized_vec<T, W / 2>;
            if constexpr (W >= 8 && !std::is_void_v<H>) n = outer_product_row<accumulate, H>(n, N, x[m], y, r);
            using Q = simd::sized_vec<T, W / 4>;
            if constexpr (W >= 16 && !std::is_void_v<Q>) n = outer_product_row<accumulate, Q>(n, N, x[m], y, r);
        }
        outer_product_row<accumulate, T>(n, N, x[m], y, r);
    }
}

template <bool accumulate, class T>
void outer_product_reference(size_t M, size_t N, const T* x, const T* y, T* c, size_t ldc) {
    for (size_t m = 0; m < M; ++m)
        for (size_t n = 0; n < N; ++n) c[m * ldc + n] = (accumulate ? c[m * ldc + n] : T(0)) + x[m] * y[n];
}

namespace detail {
// gather_transpose (below) for samples [s0, s1) and features [f0, F) of a chunk of n samples only
// (n is still the whole chunk's size: the row stride of dst).
template <class S, class D, class Convert>
void gather_transpose_part(const S* src, size_t F, const std::uint32_t* index, size_t n, D* dst, Convert convert,
                           size_t s0, size_t s1, size_t f0) {
    for (size_t s = s0; s < s1; ++s) {
        const S* r = src + static_cast<size_t>(index ? index[s] : s) * F;
        for (size_t f = f0; f < F; ++f) dst[f * n + s] = convert(r[f]);
    }
}
}  // namespace detail

// Feature-major chunk from sample-major rows: dst[f * n + s] = convert(src[row(s) * F + f]), where
// row(s) = index ? index[s] : s. This is also where a shuffled batch is gathered.
template <class S, class D, class Convert>
void gather_transpose(const S* src, size_t F, const std::uint32_t* index, size_t n, D* dst, Convert convert) {
    detail::gather_transpose_part(src, F, index, n, dst, convert, 0, n, 0);
}

#if !defined(CHAINLET_SCALAR) && defined(__AVX512F__)
namespace detail {
// out[j * ld + i] = rows[i][j] for i, j < 16, in registers: four rounds of shuffles (pairs of values,
// pairs of pairs, then 128-bit quarters twice) after which vector j holds column j of the block;
// 64 shuffles and 16 full-vector stores per 256 values, where the plain loop stores each value to
// another cache line.
inline void transpose_16x16(const float* const* rows, float* out, size_t ld) {
    __m512 a[16], b[16];
    for (size_t i = 0; i < 16; ++i) a[i] = _mm512_loadu_ps(rows[i]);
    // b[i]: per quarter, entries 0, 1 of rows i and i + 1 interleaved; b[i + 1]: entries 2, 3
    for (size_t i = 0; i < 16; i += 2) {
        b[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
        b[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
    }
    const auto lo = [](__m512 x, __m512 y) {
        return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(x), _mm512_castps_pd(y)));
    };
    const auto hi = [](__m512 x, __m512 y) {
        return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(x), _mm512_castps_pd(y)));
    };
    for (size_t i = 0; i < 16; i += 4) {  // a[i + k]: per quarter q, entry 4q + k of rows i..i+3
        a[i] = lo(b[i], b[i + 2]);
        a[i + 1] = hi(b[i], b[i + 2]);
        a[i + 2] = lo(b[i + 1], b[i + 3]);
        a[i + 3] = hi(b[i + 1], b[i + 3]);
    }
    for (size_t k = 0; k < 4; ++k) {  // quarters 0, 2 (0x88) and 1, 3 (0xDD) of rows 0-7, then of rows 8-15
        b[k] = _mm512_shuffle_f32x4(a[k], a[4 + k], 0x88);
        b[4 + k] = _mm512_shuffle_f32x4(a[k], a[4 + k], 0xDD);
        b[8 + k] = _mm512_shuffle_f32x4(a[8 + k], a[12 + k], 0x88);
        b[12 + k] = _mm512_shuffle_f32x4(a[8 + k], a[12 + k], 0xDD);
    }
    for (size_t k = 0; k < 4; ++k) {  // column 4q + k is quarter q of rows 0-3, 4-7, 8-11, 12-15
        _mm512_storeu_ps(out + k * ld, _mm512_shuffle_f32x4(b[k], b[8 + k], 0x88));
        _mm512_storeu_ps(out + (8 + k) * ld, _mm512_shuffle_f32x4(b[k], b[8 + k], 0xDD));
        _mm512_storeu_ps(out + (4 + k) * ld, _mm512_shuffle_f32x4(b[4 + k], b[12 + k], 0x88));
        _mm512_storeu_ps(out + (12 + k) * ld, _mm512_shuffle_f32x4(b[4 + k], b[12 + k], 0xDD));
    }
}

// The float block transpose of this instruction set (gather_transpose_blocked below).
inline constexpr size_t transpose_block = 16;
inline void transpose_block_of(const float* const* rows, float* out, size_t ld) { transpose_16x16(rows, out, ld); }
}  // namespace detail
#elif !defined(CHAINLET_SCALAR) && defined(__AVX__)
namespace detail {
// out[j * ld + i] = rows[i][j] for i, j < 8, in registers: pairs of values, pairs of pairs (each
// 128-bit half then holds four rows of one column), then the halves; 24 shuffles and 8 full-vector
// stores per 64 values.
inline void transpose_8x8(const float* const* rows, float* out, size_t ld) {
    __m256 a[8], b[8];
    for (size_t i = 0; i < 8; ++i) a[i] = _mm256_loadu_ps(rows[i]);
    // b[i]: per half, entries 0, 1 (4, 5) of rows i and i + 1 interleaved; b[i + 1]: entries 2, 3 (6, 7)
    for (size_t i = 0; i < 8; i += 2) {
        b[i] = _mm256_unpacklo_ps(a[i], a[i + 1]);
        b[i + 1] = _mm256_unpackhi_ps(a[i], a[i + 1]);
    }
    // a[i + k]: rows i..i+3 of column k in the low half, of column k + 4 in the high half
    for (size_t i = 0; i < 8; i += 4) {
        a[i] = _mm256_shuffle_ps(b[i], b[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        a[i + 1] = _mm256_shuffle_ps(b[i], b[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        a[i + 2] = _mm256_shuffle_ps(b[i + 1], b[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        a[i + 3] = _mm256_shuffle_ps(b[i + 1], b[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (size_t k = 0; k < 4; ++k) {
        _mm256_storeu_ps(out + k * ld, _mm256_permute2f128_ps(a[k], a[4 + k], 0x20));
        _mm256_storeu_ps(out + (k + 4) * ld, _mm256_permute2f128_ps(a[k], a[4 + k], 0x31));
    }
}
// The float block transpose of this instruction set (gather_transpose_blocked below).
inline constexpr size_t transpose_block = 8;
inline void transpose_block_of(const float* const* rows, float* out, size_t ld) { transpose_8x8(rows, out, ld); }
}  // namespace detail
#endif

#if !defined(CHAINLET_SCALAR) && defined(__AVX__)
namespace detail {
// out[j * ld + i] = rows[i][j] for i < transpose_block and j < length (a multiple of the block): the
// strip of those rows, block after block along j.
inline void transpose_strip(const float* const* rows, size_t length, float* out, size_t ld) {
    constexpr size_t B = transpose_block;
    for (size_t j = 0; j < length; j += B) {
        const float* block[B];
        for (size_t i = 0; i < B; ++i) block[i] = rows[i] + j;
        transpose_block_of(block, out + j * ld, ld);
    }
}

// gather_transpose of floats in blocks of B samples x B features through the block transpose; the
// plain loop does the features and samples left over. Kept out of line: the caller's inlining (and
// GCC's view of its buffers) stays as it was without it.
[[gnu::noinline]] inline void gather_transpose_blocked(const float* src, size_t F, const std::uint32_t* index, size_t n,
                                                       float* dst) {
    constexpr size_t B = transpose_block;
    const size_t blocked = n - n % B, blocked_features = F - F % B;
    for (size_t s0 = 0; s0 < blocked; s0 += B) {
        const float* rows[B];
        for (size_t i = 0; i < B; ++i) rows[i] = src + static_cast<size_t>(index ? index[s0 + i] : s0 + i) * F;
        transpose_strip(rows, blocked_features, dst + s0, n);
        if (blocked_features < F)
            gather_transpose_part(src, F, index, n, dst, std::identity{}, s0, s0 + B, blocked_features);
    }
    gather_transpose_part(src, F, index, n, dst, std::identity{}, blocked, n, 0);
}
}  // namespace detail
#endif

// The same without a conversion. Floats with at least one block of features (LeNet5's 784 pixels)
// take detail::gather_transpose_blocked, whose blocks are transposed in registers and stored as whole
// vectors, where the loop above stores every value to another cache line (docs/profile.md). That loop
// is its scalar twin.
template <class S, class D>
void gather_transpose(const S* src, size_t F, const std::uint32_t* index, size_t n, D* dst) {
#if !defined(CHAINLET_SCALAR) && defined(__AVX__)
    if constexpr (std::is_same_v<S, float> && std::is_same_v<D, float>)
        if (F >= detail::transpose_block) return detail::gather_transpose_blocked(src, F, index, n, dst);
#endif
    gather_transpose(src, F, index, n, dst, [](S v) { return static_cast<D>(v); });
}

// Sample-major rows from a feature-major chunk: dst[s * F + f] = src[f * ld + s] for the first n of
// the chunk's ld >= n samples.
template <class T>
void scatter_transpose(const T* src, size_t F, size_t n, T* dst, size_t ld) {
    for (size_t f = 0; f < F; ++f)
        for (size_t s = 0; s < n; ++s) dst[s * F + f] = src[f * ld + s];
}
template <class T>
void scatter_transpose(const T* src, size_t F, size_t n, T* dst) {
    scatter_transpose(src, F, n, dst, n);
}

}  // namespace chainlet::kernels
