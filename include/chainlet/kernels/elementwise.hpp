// Element-wise and reduction loops: activation pullbacks, row sums (bias gradients), buffer sums
// (partial gradients), and the transposes between the user's sample-major data and the chain's
// feature-major chunks. Each is one template body run as a vector loop plus a scalar tail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "chainlet/kernels/simd.hpp"

namespace chainlet::kernels {

using std::size_t;

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

// out[m] += sum_n a[m * lda + n]
template <class T>
void row_sums_add(size_t M, size_t N, const T* a, size_t lda, T* out) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    for (size_t m = 0; m < M; ++m) {
        const T* r = a + m * lda;
        T s = 0;
        size_t n = 0;
        if constexpr (simd::enabled) {
            if (N >= 2 * W) {
                V s0(T(0)), s1(T(0));
                for (const size_t n_end = N - N % (2 * W); n < n_end; n += 2 * W) {
                    s0 += V::load_unaligned(r + n);
                    s1 += V::load_unaligned(r + n + W);
                }
                s = simd::hsum<T>(s0 + s1);
            }
        }
        for (; n < N; ++n) s += r[n];
        out[m] += s;
    }
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

// C[m, n] += x[m] y[n]: the weight gradient of one sample, an outer product, vectorised along n, with
// a half- and a quarter-width vector where they fit (a layer of 4 or 8 outputs).
template <class T>
void outer_add(size_t M, size_t N, const T* x, const T* y, T* c, size_t ldc) {
    constexpr size_t W = simd::width<T>;
    for (size_t m = 0; m < M; ++m) {
        T* r = c + m * ldc;
        size_t n = 0;
        auto run = [&]<class V>(size_t n_end) {
            const V xm(x[m]);
            for (; n + simd::lanes<V> <= n_end; n += simd::lanes<V>)
                simd::storev(r + n, simd::fma(xm, simd::loadv<V>(y + n), simd::loadv<V>(r + n)));
        };
        if constexpr (simd::enabled) {
            run.template operator()<simd::vec<T>>(N);
            using H = simd::sized_vec<T, W / 2>;
            if constexpr (W >= 8 && !std::is_void_v<H>) run.template operator()<H>(N);
            using Q = simd::sized_vec<T, W / 4>;
            if constexpr (W >= 16 && !std::is_void_v<Q>) run.template operator()<Q>(N);
        }
        run.template operator()<T>(N);
    }
}

template <class T>
void outer_add_reference(size_t M, size_t N, const T* x, const T* y, T* c, size_t ldc) {
    for (size_t m = 0; m < M; ++m)
        for (size_t n = 0; n < N; ++n) c[m * ldc + n] += x[m] * y[n];
}

// Feature-major chunk from sample-major rows: dst[f * n + s] = convert(src[row(s) * F + f]), where
// row(s) = index ? index[s] : s. This is also where a shuffled batch is gathered.
template <class S, class D, class Convert>
void gather_transpose(const S* src, size_t F, const std::uint32_t* index, size_t n, D* dst, Convert convert) {
    for (size_t s = 0; s < n; ++s) {
        const S* r = src + static_cast<size_t>(index ? index[s] : s) * F;
        for (size_t f = 0; f < F; ++f) dst[f * n + s] = convert(r[f]);
    }
}

template <class S, class D>
void gather_transpose(const S* src, size_t F, const std::uint32_t* index, size_t n, D* dst) {
    gather_transpose(src, F, index, n, dst, [](S v) { return static_cast<D>(v); });
}

// Sample-major rows from a feature-major chunk: dst[s * F + f] = src[f * n + s].
template <class T>
void scatter_transpose(const T* src, size_t F, size_t n, T* dst) {
    for (size_t f = 0; f < F; ++f)
        for (size_t s = 0; s < n; ++s) dst[s * F + f] = src[f * n + s];
}

}  // namespace chainlet::kernels
