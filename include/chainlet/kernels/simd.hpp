// SIMD vocabulary shared by every kernel: the vector type for an element type, its width, and
// scalar/vector overloads of the few math functions the activations need, so that one template
// body serves both the vector loop and its scalar tail (and the scalar reference).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#ifndef CHAINLET_SCALAR
// GCC 12.2 reports its own _mm512_min_ps/_mm512_max_ps (undefined pass-through operand) as
// "may be used uninitialized" (GCC bug 105593); silence that inside the intrinsics headers only.
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning (clang, used for the TSan and fuzz builds, does not know it)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop
#endif

namespace chainlet::simd {

#ifdef CHAINLET_SCALAR
inline constexpr bool enabled = false;
template <class T, std::size_t N>
using sized_vec = void;
template <class T>
using vec = T;
template <class T>
inline constexpr std::size_t width = 1;
inline constexpr const char* arch_name = "scalar";
inline constexpr int vector_registers = 16;
#else
inline constexpr bool enabled = true;
template <class T>
using vec = xsimd::batch<T>;  // the widest ISA the compiler flags allow (-march=native by default)
template <class T>
inline constexpr std::size_t width = xsimd::batch<T>::size;
inline constexpr const char* arch_name = xsimd::default_arch::name();
// Vector registers the compiler may use: 32 with AVX-512 (zmm0-31), else taken as 16 (AVX and SSE on
// x86-64; aarch64 has 32 NEON registers, of which the tiles sized for 16 use half); a kernel sizes its
// register tiles by it.
#ifdef __AVX512F__
inline constexpr int vector_registers = 32;
#else
inline constexpr int vector_registers = 16;
#endif
// A narrower vector of N lanes of another instruction set compiled in (e.g. 8 AVX2 lanes in an
// AVX-512 build), or void: for the tail of a loop whose length is not a multiple of the full width.
template <class T, std::size_t N>
using sized_vec = xsimd::make_sized_batch_t<T, N>;
#endif

template <class V>
struct scalar_of {
    using type = V;
};
#ifndef CHAINLET_SCALAR
template <class T, class A>
struct scalar_of<xsimd::batch<T, A>> {
    using type = T;
};
#endif
template <class V>
using scalar_t = typename scalar_of<V>::type;

template <class V>
inline constexpr bool is_vector = !std::is_arithmetic_v<V>;

// Loads, stores and lane counts for V = a vector or a plain scalar (the tails).
template <class V>
constexpr std::size_t lanes_of() {
    if constexpr (is_vector<V>) return V::size;
    else return 1;
}
template <class V>
inline constexpr std::size_t lanes = lanes_of<V>();
template <class V, class T>
inline V loadv(const T* p) {
    if constexpr (is_vector<V>) return V::load_unaligned(p);
    else return *p;
}
template <class V, class T>
inline void storev(T* p, V v) {
    if constexpr (is_vector<V>) v.store_unaligned(p);
    else *p = v;
}
// Whether V is a 64-byte AVX-512 vector, the only kind whose lanes load_first and store_first can mask.
template <class V>
inline constexpr bool has_masked_lanes =
#if !defined(CHAINLET_SCALAR) && defined(__AVX512F__)
    is_vector<V> && sizeof(V) == 64;
#else
    false;
#endif
// The first `count` lanes of a 64-byte AVX-512 vector V (1 <= count <= lanes<V>): loaded with the
// others zero, or stored with the memory past them untouched, through a lane mask (no fault, no access
// past them), for a tile's last vector past the end of a row (nn_panel). Only AVX-512 has the masks;
// nn_panel takes this route only there (kernels::masked_tail_tiles), so other widths have no form.
// The mask (1u << count) - 1 is written out in each call: named (a helper, or even a local), it changed
// GCC 12's register allocation in nn_panel's masked tiles (the same operations, other registers and order).
template <class V, class T>
inline V load_first(const T* p, std::size_t count) {
    static_assert(has_masked_lanes<V>, "load_first: only for 64-byte AVX-512 vectors");
#if !defined(CHAINLET_SCALAR) && defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>) return V(_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1), p));
    else return V(_mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << count) - 1), p));
#else
    (void)p, (void)count;
    return V{};
#endif
}
template <class V, class T>
inline void store_first(T* p, V v, std::size_t count) {
    static_assert(has_masked_lanes<V>, "store_first: only for 64-byte AVX-512 vectors");
#if !defined(CHAINLET_SCALAR) && defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>) _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << count) - 1), v);
    else _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << count) - 1), v);
#else
    (void)p, (void)v, (void)count;
#endif
}

template <class T>
inline T hsum(vec<T> v) {
#ifdef CHAINLET_SCALAR
    return v;
#else
    return xsimd::hadd(v);
#endif
}

// The sums of L vectors of L lanes each, lane i holding the sum of rows[i] (xsimd's haddp; use it on
// SSE and AVX widths only, see hsums for AVX-512 float). A scalar is its own sum.
template <class V>
inline V haddp(const V* rows) {
#ifdef CHAINLET_SCALAR
    return rows[0];
#else
    if constexpr (is_vector<V>) return xsimd::haddp(rows);
    else return rows[0];
#endif
}

// How many vectors hsums reduces together (the vectors of a group each go through the same tree of
// additions, whichever vectors share the group; a vector left over after the groups takes another).
template <class T>
inline constexpr std::size_t hsum_group = std::is_same_v<T, float> && width<T> == 16 ? 8 : width<T>;

// out[i] += (add) or = the sum of the lanes of v[i] for i < count. Each group of hsum_group vectors is
// reduced at once by xsimd's transposing tree of shuffles and adds (about one instruction per vector,
// against the log2(width) dependent steps of reducing each vector alone); the vectors left over go one
// by one. The order of every sum is fixed, so the result does not depend on where or when it runs.
// (xsimd 8.1's haddp of 16 AVX-512 float vectors returns its sums in the wrong lanes, 0 1 4 5 2 3 ...:
// there each vector is first folded to 8 lanes, its two halves added, and AVX's haddp, which is right,
// reduces 8 of those at a time. test_kernels checks every lane.)
template <bool add, class T, std::size_t count>
inline void hsums(const vec<T>* v, T* out) {
#ifdef CHAINLET_SCALAR
    constexpr std::size_t grouped = 0;  // no vectors: every sum by the loop at the end
#else
    constexpr std::size_t group = hsum_group<T>;
    constexpr std::size_t grouped = count - count % group;
    auto put = [out](std::size_t i, auto sums) {
        if constexpr (add) sums = sums + decltype(sums)::load_unaligned(out + i);
        sums.store_unaligned(out + i);
    };
    for (std::size_t i = 0; i < grouped; i += group) {
#ifdef __AVX512F__
        if constexpr (std::is_same_v<T, float> && width<T> == 16) {
            using H = xsimd::batch<float, xsimd::avx2>;
            H half[8];
            for (std::size_t j = 0; j < 8; ++j) {
                const __m512 x = v[i + j];
                half[j] = H(_mm512_castps512_ps256(x)) +
                          H(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
            }
            put(i, xsimd::haddp(half));
            continue;
        }
#endif
        put(i, xsimd::haddp(v + i));
    }
#endif
    for (std::size_t k = grouped; k < count; ++k) {
        if constexpr (add) out[k] += hsum<T>(v[k]);
        else out[k] = hsum<T>(v[k]);
    }
}
template <class T, std::size_t count>
inline void hsum_add(const vec<T>* v, T* out) { hsums<true, T, count>(v, out); }
template <class T, std::size_t count>
inline void hsum_store(const vec<T>* v, T* out) { hsums<false, T, count>(v, out); }

// Returns v, held in a register: without this GCC 12 re-reads a loaded vector from memory for every
// FMA that uses it (folding the load into the FMA), which doubles the loads of a register tile.
template <class V>
inline V pinned(V v) {
#if defined(CHAINLET_SCALAR)
#elif defined(__aarch64__)
    if constexpr (is_vector<V>) __asm__("" : "+w"(v.data));  // "w": an Advanced SIMD register
#else
    if constexpr (is_vector<V>) __asm__("" : "+v"(v.data));  // "v": any SSE/AVX/AVX-512 register
#endif
    return v;
}

// One template per function for scalars and vectors alike. (Calls with xsimd batches that are not
// qualified with simd:: may also find xsimd's own overloads by ADL; those are more specialised and win.)
#ifdef CHAINLET_SCALAR
#define CHAINLET_SIMD_OR_STD(vector_call, scalar_call) return scalar_call
#else
#define CHAINLET_SIMD_OR_STD(vector_call, scalar_call) \
    if constexpr (is_vector<V>) return vector_call;    \
    else return scalar_call
#endif
// a b + c and c - a b in one rounding, by the FMA instruction of V's register. xsimd 8.1 writes the
// AVX-512 and SSE forms as a * b + c and -a * b + c and leaves the fusing to the compiler, which fuses or
// not by its tuning: GCC 12 with -march=znver1..3 (which avoids chains of FMAs) rounded some products
// twice that -march=haswell fused, so two routes of the same sum gave other bits on those CPUs. With
// the instruction written out, every vector width and the scalar std::fma round once on every CPU.
#ifndef CHAINLET_SCALAR
template <bool negate, class V>
inline V fma_instruction(V a, V b, V c) {
    constexpr bool f = std::is_same_v<scalar_t<V>, float>;
    constexpr std::size_t bytes = sizeof(V);  // of the register: xsimd batches hold only that
#ifdef __AVX512F__
    if constexpr (bytes == 64 && f) return negate ? _mm512_fnmadd_ps(a, b, c) : _mm512_fmadd_ps(a, b, c);
    if constexpr (bytes == 64 && !f) return negate ? _mm512_fnmadd_pd(a, b, c) : _mm512_fmadd_pd(a, b, c);
#endif
#ifdef __FMA__
    if constexpr (bytes == 32 && f) return negate ? _mm256_fnmadd_ps(a, b, c) : _mm256_fmadd_ps(a, b, c);
    if constexpr (bytes == 32 && !f) return negate ? _mm256_fnmadd_pd(a, b, c) : _mm256_fmadd_pd(a, b, c);
    if constexpr (bytes == 16 && f) return negate ? _mm_fnmadd_ps(a, b, c) : _mm_fmadd_ps(a, b, c);
    if constexpr (bytes == 16 && !f) return negate ? _mm_fnmadd_pd(a, b, c) : _mm_fmadd_pd(a, b, c);
#endif
#if defined(__aarch64__)
    if constexpr (bytes == 16 && f) return negate ? vfmsq_f32(c, a, b) : vfmaq_f32(c, a, b);
    if constexpr (bytes == 16 && !f) return negate ? vfmsq_f64(c, a, b) : vfmaq_f64(c, a, b);
#endif
    if constexpr (negate) return xsimd::fnma(a, b, c);
    else return xsimd::fma(a, b, c);
}
#endif
template <class V>
inline V fma(V a, V b, V c) { CHAINLET_SIMD_OR_STD(fma_instruction<false>(a, b, c), std::fma(a, b, c)); }
template <class V>
inline V fnma(V a, V b, V c) { CHAINLET_SIMD_OR_STD(fma_instruction<true>(a, b, c), std::fma(-a, b, c)); }
template <class V, class M>
inline V select(M m, V a, V b) { CHAINLET_SIMD_OR_STD(xsimd::select(m, a, b), m ? a : b); }
template <class V>
inline V max(V a, V b) { CHAINLET_SIMD_OR_STD(xsimd::max(a, b), a > b ? a : b); }
template <class V>
inline V min(V a, V b) { CHAINLET_SIMD_OR_STD(xsimd::min(a, b), a < b ? a : b); }
template <class V>
inline V abs(V a) { CHAINLET_SIMD_OR_STD(xsimd::abs(a), std::abs(a)); }
template <class V>
inline V exp(V a) { CHAINLET_SIMD_OR_STD(xsimd::exp(a), std::exp(a)); }
template <class V>
inline V log1p(V a) { CHAINLET_SIMD_OR_STD(xsimd::log1p(a), std::log1p(a)); }
template <class V>
inline V sin(V a) { CHAINLET_SIMD_OR_STD(xsimd::sin(a), std::sin(a)); }
template <class V>
inline V cos(V a) { CHAINLET_SIMD_OR_STD(xsimd::cos(a), std::cos(a)); }
template <class V>
inline V sqrt(V a) { CHAINLET_SIMD_OR_STD(xsimd::sqrt(a), std::sqrt(a)); }
// The lanes holding NaN, as a mask (for simd::select). Not a != a: xsimd compares vectors ordered, so
// NaN != NaN is false there.
template <class V>
inline auto isnan(V a) { CHAINLET_SIMD_OR_STD(xsimd::isnan(a), std::isnan(a)); }
// a, with zero in the lanes where |a| is below the smallest normal number (NaN compares false: kept).
template <class V>
inline V flush_subnormal(V a) {
    using T = scalar_t<V>;
    return simd::select(simd::abs(a) < V(std::numeric_limits<T>::min()), V(T(0)), a);
}
template <class V>
inline V tanh_exact(V a) { CHAINLET_SIMD_OR_STD(xsimd::tanh(a), std::tanh(a)); }
#undef CHAINLET_SIMD_OR_STD

namespace detail {
// 2^22: c + 2^22 rounds c >= 0 to a multiple of 1/2 (floats in [2^22, 2^23) are 1/2 apart), and the
// multiple's index k = 2 a sits in the sum's low bits.
inline constexpr float half_step_magic = 4194304.0f;

// tanh(k / 2) for k = 0 .. 31, rounded to float (scripts/fit_tanh.py prints them; a test recomputes them).
// From k = 19 on they are 1.
alignas(64) inline constexpr float tanh_of_halves[32] = {
    0.0f,         0.462117165f, 0.761594176f, 0.905148268f, 0.964027584f, 0.986614287f, 0.995054781f,
    0.998177886f, 0.999329329f, 0.999753237f, 0.999909222f, 0.999966621f, 0.999987721f, 0.99999547f,
    0.999998331f, 0.999999404f, 0.999999762f, 0.99999994f,  0.99999994f,  1.0f,         1.0f,
    1.0f,         1.0f,         1.0f,         1.0f,         1.0f,         1.0f,         1.0f,
    1.0f,         1.0f,         1.0f,         1.0f};

// tanh_of_halves[k mod 32] for each lane, k the low bits of the lane's float representation.
template <class V>
inline V tanh_of_halves_at(V s) {
    if constexpr (!is_vector<V>) {
        std::uint32_t k;
        std::memcpy(&k, &s, sizeof k);
        return tanh_of_halves[k & 31u];
    } else {
#if !defined(CHAINLET_SCALAR) && defined(__AVX512F__)
        // one permute across the two registers that hold the table (it reads the index's low 5 bits)
        if constexpr (sizeof(V) == 64 && std::is_same_v<scalar_t<V>, float>)
            return _mm512_permutex2var_ps(_mm512_load_ps(tanh_of_halves), _mm512_castps_si512(s),
                                          _mm512_load_ps(tanh_of_halves + 16));
#endif
        // narrower vectors (the part vectors of an AVX-512 build, 8 or 4 lanes; rare: gemm_nn's tails
        // are masked full vectors): lane by lane
        alignas(64) scalar_t<V> in[V::size], out[V::size];
        s.store_aligned(in);
        for (std::size_t l = 0; l < V::size; ++l) out[l] = tanh_of_halves_at(in[l]);
        return V::load_aligned(out);
    }
}

// c - a, with a = s - 2^22 = c rounded to a multiple of 1/2 (ties to even): exact either way. AVX512DQ's
// vreduceps does it in one operation.
template <class V>
inline V minus_nearest_half(V c, V s) {
#if !defined(CHAINLET_SCALAR) && defined(__AVX512DQ__)
    if constexpr (is_vector<V>)
        if constexpr (sizeof(V) == 64 && std::is_same_v<scalar_t<V>, float>) return _mm512_reduce_ps(c, 1 << 4);
#endif
    return c - (s - V(half_step_magic));
}
}  // namespace detail

// The float tanh's form: the table below where AVX-512 looks it up with one permute; elsewhere the
// rational, since AVX2 has no such lookup (through its 8-lane gather the table form was about four
// times slower than the rational; docs/profile.md). Vector and scalar forms use the same one.
#if !defined(CHAINLET_SCALAR) && defined(__AVX512F__)
inline constexpr bool tanh_from_table = true;
#else
inline constexpr bool tanh_from_table = false;
#endif

// Float tanh as a rational minimax approximation x P(x^2) / Q(x^2), P and Q of degree 4, fitted to tanh
// on |x| <= 8 with P(0) = Q(0), so that tiny x give x (Lawson-weighted least squares on the relative error;
// scripts/fit_tanh.py --rational): 6.7e-9 relative error before rounding, within 4.4
// ulp of std::tanh after it (5.2 over every third float of [0, 12]). x is clamped to +-8, where tanh is
// 1 - 2.3e-7 (4 ulp below 1): with a clamp at 8.1 or beyond, rounding took the result above 1; |tanh| <=
// 1 is kept. P is monic, so its first Horner step is an addition. Per vector: 9 multiplies or FMAs, one
// addition, one division (a true division: a reciprocal estimate and its Newton step take more of the FMA
// pipes than the division does; docs/profile.md compares the forms).
template <class V>
inline V tanh_rational(V x) {
    // The clamp's bound first: x86's min and max return their second operand when one is NaN, so a NaN x
    // stays NaN.
    const V c = simd::max(V(-8.0f), simd::min(V(8.0f), x));
    const V t = c * c;
    V p = t + V(1434.6333f);
    p = simd::fma(t, p, V(233729.562f));
    p = simd::fma(t, p, V(8793050.0f));
    p = simd::fma(t, p, V(65391404.0f));
    V q = simd::fma(t, V(55.8947563f), V(22335.8945f));
    q = simd::fma(t, q, V(1711607.88f));
    q = simd::fma(t, q, V(30590182.0f));
    q = simd::fma(t, q, V(65391404.0f));
    return c * p / q;
}

// tanh: in float where tanh_from_table, tanh(a + b) = (tanh a + tanh b) / (1 + tanh a tanh b), with a =
// |x| rounded to a multiple of 1/2 (|x| clamped to 15.5, where tanh is 1 in float), tanh a from a table of 32 (one
// AVX-512 permute), b = |x| - a in [-1/4, 1/4] and tanh b = b + b t (c1 + c2 t + c3 t^2), t = b^2
// (minimax relative error 2.9e-9; scripts/fit_tanh.py), then x's sign. Adding 2^22 to |x| leaves
// round(2 |x|) in the low bits of the sum: the table index without a conversion. Within 2.9 ulp of
// std::tanh (tests/test_activations.cpp); tanh(0) is 0, +-inf gives exactly +-1 (a = 15.5 gives tanh a =
// 1, and then the quotient is exactly 1), NaN stays NaN (through b).
// Cost per 16 lanes: 6 multiplies or FMAs and a division, the additions, logic and permute beside them
// on their own pipes: three multiplies fewer than tanh_rational. The forms that avoid the division
// (reciprocal estimates, per-interval polynomials) cost more (docs/profile.md).
// Elsewhere in float, tanh_rational. In double, the accurate library tanh, since double is what the
// gradient checks and scientific users run.
template <class V>
inline V tanh(V x) {
    using T = scalar_t<V>;
    if constexpr (std::is_same_v<T, float> && tanh_from_table) {
        // min's second operand is |x|: x86's min returns it when one is NaN, so NaN reaches b
        const V c = simd::min(V(15.5f), simd::abs(x));
        const V s = c + V(detail::half_step_magic);
        const V tanh_a = detail::tanh_of_halves_at(s);
        const V b = detail::minus_nearest_half(c, s);
        const V t = b * b;
        const V r = simd::fma(t, simd::fma(t, V(-0.0514300652f), V(0.133242369f)), V(-0.33333239f));
        const V tanh_b = simd::fma(b * t, r, b);
        const V y = (tanh_a + tanh_b) / simd::fma(tanh_a, tanh_b, V(1.0f));
        // y >= +0 (or NaN): x's sign bit ored in
        if constexpr (is_vector<V>) {
            return y | (x & V(-0.0f));
        } else {
            return std::copysign(y, x);
        }
    } else if constexpr (std::is_same_v<T, float>) {
        return tanh_rational(x);
    } else {
        return tanh_exact(x);
    }
}

}  // namespace chainlet::simd
