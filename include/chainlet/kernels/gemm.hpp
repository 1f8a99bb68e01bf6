// The two matrix kernels every dense and convolution pullback is made of, each with a plain scalar
// reference twin that the tests compare it with.
//
//   gemm_nn:  C[m, n] = act(bias + sum_k A(m, k) B[k, n])      (or C += A B, see Accumulate)
//             vectorised along n (contiguous in B and C), A read by broadcast through two strides,
//             so it serves W X, W^T X and outer products alike.
//   gemm_nt:  C[m, p] += sum_k A[m, k] B[p, k]                  (dot products along contiguous k)
//
// Register tiles: MR rows x NR vectors of accumulators (4 x 4 = 16 of the 32 AVX-512 registers),
// with smaller tiles and a scalar tail (the same template with a scalar V) for the remainders.
#pragma once

#include <cstddef>
#include <type_traits>

#include "chainlet/activations.hpp"
#include "chainlet/kernels/simd.hpp"

namespace chainlet::kernels {

using std::ptrdiff_t;
using std::size_t;

using simd::lanes;
using simd::pinned;
using simd::loadv;
using simd::storev;

// Where the accumulators of gemm_nn start: zero, C itself, a per-row or a per-column bias.
enum class Init { zero, accumulate, row_bias, col_bias };

template <class Act, Init init, class V, int MR, int NR, class T>
inline void nn_tile(size_t K, const T* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const T* b, size_t ldb, T* c,
                    size_t ldc, const T* bias, T* z) {
    constexpr size_t W = lanes<V>;
    V acc[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) {
            if constexpr (init == Init::zero) acc[i][j] = V(T(0));
            else if constexpr (init == Init::accumulate) acc[i][j] = loadv<V>(c + i * ldc + j * W);
            else if constexpr (init == Init::row_bias) acc[i][j] = V(bias[i]);
            else acc[i][j] = loadv<V>(bias + j * W);
        }
    for (size_t k = 0; k < K; ++k) {
        V bv[NR];
        for (int j = 0; j < NR; ++j) bv[j] = pinned(loadv<V>(b + k * ldb + j * W));
        const T* ak = a + static_cast<ptrdiff_t>(k) * a_cs;
        for (int i = 0; i < MR; ++i) {
            const V ai(ak[i * a_rs]);
            for (int j = 0; j < NR; ++j) acc[i][j] = simd::fma(ai, bv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) {
            if (z) storev(z + i * ldc + j * W, acc[i][j]);
            storev(c + i * ldc + j * W, Act::value(acc[i][j]));
        }
}

// Rows [m0, m0 + MR) of C, all columns: NR-vector tiles, then one-vector tiles, then scalars.
template <class Act, Init init, int MR, class T>
inline void nn_rows(size_t N, size_t K, const T* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const T* b, size_t ldb,
                    T* c, size_t ldc, const T* bias, T* z) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    constexpr int NR = 4;
    const bool col_bias = init == Init::col_bias;
    size_t n = 0;
    if constexpr (simd::enabled) {
        for (const size_t n_end = N - N % (NR * W); n < n_end; n += NR * W)
            nn_tile<Act, init, V, MR, NR>(K, a, a_rs, a_cs, b + n, ldb, c + n, ldc, col_bias ? bias + n : bias,
                                          z ? z + n : z);
        for (const size_t n_end = N - N % (W); n < n_end; n += W)
            nn_tile<Act, init, V, MR, 1>(K, a, a_rs, a_cs, b + n, ldb, c + n, ldc, col_bias ? bias + n : bias,
                                         z ? z + n : z);
    }
    for (; n < N; ++n)
        nn_tile<Act, init, T, MR, 1>(K, a, a_rs, a_cs, b + n, ldb, c + n, ldc, col_bias ? bias + n : bias,
                                     z ? z + n : z);
}

// C (M x N, row stride ldc) = Act(start + A B), A(m, k) = a[m * a_rs + k * a_cs], B row stride ldb.
// start: 0, C, bias[m] or bias[n] according to `init`. If z is given (row stride ldc) it receives the
// pre-activation.
template <class Act, Init init, class T>
void gemm_nn(size_t M, size_t N, size_t K, const T* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const T* b, size_t ldb,
             T* c, size_t ldc, std::type_identity_t<const T*> bias = nullptr, std::type_identity_t<T*> z = nullptr) {
    static_assert(init != Init::accumulate || std::is_same_v<Act, Identity>, "accumulation has no activation");
    constexpr int MR = 4;
    size_t m = 0;
    auto row_ptrs = [&](size_t r, const T*& ar, T*& cr, const T*& br, T*& zr) {
        ar = a + static_cast<ptrdiff_t>(r) * a_rs;
        cr = c + r * ldc;
        br = init == Init::row_bias ? bias + r : bias;
        zr = z ? z + r * ldc : z;
    };
    const T *ar, *br;
    T *cr, *zr;
    for (const size_t m_end = M - M % (MR); m < m_end; m += MR) {
        row_ptrs(m, ar, cr, br, zr);
        nn_rows<Act, init, MR>(N, K, ar, a_rs, a_cs, b, ldb, cr, ldc, br, zr);
    }
    for (; m < M; ++m) {
        row_ptrs(m, ar, cr, br, zr);
        nn_rows<Act, init, 1>(N, K, ar, a_rs, a_cs, b, ldb, cr, ldc, br, zr);
    }
}

template <class Act, Init init, class T>
void gemm_nn_reference(size_t M, size_t N, size_t K, const T* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const T* b,
                       size_t ldb, T* c, size_t ldc, std::type_identity_t<const T*> bias = nullptr,
                       std::type_identity_t<T*> z = nullptr) {
    for (size_t m = 0; m < M; ++m)
        for (size_t n = 0; n < N; ++n) {
            T s = init == Init::zero ? T(0)
                  : init == Init::accumulate ? c[m * ldc + n]
                  : init == Init::row_bias   ? bias[m]
                                             : bias[n];
            for (size_t k = 0; k < K; ++k)
                s += a[static_cast<ptrdiff_t>(m) * a_rs + static_cast<ptrdiff_t>(k) * a_cs] * b[k * ldb + n];
            if (z) z[m * ldc + n] = s;
            c[m * ldc + n] = Act::value(s);
        }
}

// C[m, p] += sum_k A[m, k] B[p, k] over an MR x PR tile: vector partial sums along k, one horizontal
// sum per output at the end.
template <int MR, int PR, class T>
inline void nt_tile(size_t K, const T* a, size_t lda, const T* b, size_t ldb, T* c, size_t ldc) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    T out[MR][PR] = {};
    size_t k = 0;
    if constexpr (simd::enabled) {
        if (K >= W) {
            V acc[MR][PR];
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < PR; ++j) acc[i][j] = V(T(0));
            for (const size_t k_end = K - K % (W); k < k_end; k += W) {
                V av[MR], bv[PR];
                for (int i = 0; i < MR; ++i) av[i] = pinned(V::load_unaligned(a + i * lda + k));
                for (int j = 0; j < PR; ++j) bv[j] = pinned(V::load_unaligned(b + j * ldb + k));
                for (int i = 0; i < MR; ++i)
                    for (int j = 0; j < PR; ++j) acc[i][j] = simd::fma(av[i], bv[j], acc[i][j]);
            }
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < PR; ++j) out[i][j] = simd::hsum<T>(acc[i][j]);
        }
    }
    for (; k < K; ++k)
        for (int i = 0; i < MR; ++i)
            for (int j = 0; j < PR; ++j) out[i][j] += a[i * lda + k] * b[j * ldb + k];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < PR; ++j) c[i * ldc + j] += out[i][j];
}

template <int MR, class T>
inline void nt_rows(size_t P, size_t K, const T* a, size_t lda, const T* b, size_t ldb, T* c, size_t ldc) {
    constexpr int PR = 4;
    size_t p = 0;
    for (const size_t p_end = P - P % (PR); p < p_end; p += PR) nt_tile<MR, PR>(K, a, lda, b + p * ldb, ldb, c + p, ldc);
    for (; p < P; ++p) nt_tile<MR, 1>(K, a, lda, b + p * ldb, ldb, c + p, ldc);
}

// C (M x P, row stride ldc) += A (M x K, row stride lda) B^T, B (P x K, row stride ldb).
template <class T>
void gemm_nt(size_t M, size_t P, size_t K, const T* a, size_t lda, const T* b, size_t ldb, T* c, size_t ldc) {
    constexpr int MR = 4;
    size_t m = 0;
    for (const size_t m_end = M - M % (MR); m < m_end; m += MR) nt_rows<MR>(P, K, a + m * lda, lda, b, ldb, c + m * ldc, ldc);
    for (; m < M; ++m) nt_rows<1>(P, K, a + m * lda, lda, b, ldb, c + m * ldc, ldc);
}

template <class T>
void gemm_nt_reference(size_t M, size_t P, size_t K, const T* a, size_t lda, const T* b, size_t ldb, T* c,
                       size_t ldc) {
    for (size_t m = 0; m < M; ++m)
        for (size_t p = 0; p < P; ++p) {
            T s = 0;
            for (size_t k = 0; k < K; ++k) s += a[m * lda + k] * b[p * ldb + k];
            c[m * ldc + p] += s;
        }
}

// y[n] = act(bias[n] + sum_k x[k] B[k, n]): the one-sample dense forward. Four partial sums per
// output vector break the FMA dependency chain along k (latency 4, which a single chain would pay K times).
template <class Act, class T>
void gemv_t(size_t N, size_t K, const T* x, const T* b, size_t ldb, const T* bias, T* y,
            std::type_identity_t<T*> z = nullptr) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    size_t n = 0;
    if constexpr (simd::enabled) {
        for (const size_t n_end = N - N % (W); n < n_end; n += W) {
            V s0 = V::load_unaligned(bias + n), s1(T(0)), s2(T(0)), s3(T(0));
            size_t k = 0;
            for (const size_t k_end = K - K % (4); k < k_end; k += 4) {
                s0 = simd::fma(V(x[k]), V::load_unaligned(b + k * ldb + n), s0);
                s1 = simd::fma(V(x[k + 1]), V::load_unaligned(b + (k + 1) * ldb + n), s1);
                s2 = simd::fma(V(x[k + 2]), V::load_unaligned(b + (k + 2) * ldb + n), s2);
                s3 = simd::fma(V(x[k + 3]), V::load_unaligned(b + (k + 3) * ldb + n), s3);
            }
            for (; k < K; ++k) s0 = simd::fma(V(x[k]), V::load_unaligned(b + k * ldb + n), s0);
            const V s = (s0 + s1) + (s2 + s3);
            if (z) s.store_unaligned(z + n);
            Act::value(s).store_unaligned(y + n);
        }
    }
    for (; n < N; ++n) {
        T s = bias[n];
        for (size_t k = 0; k < K; ++k) s += x[k] * b[k * ldb + n];
        if (z) z[n] = s;
        y[n] = Act::value(s);
    }
}

}  // namespace chainlet::kernels
