// The two matrix kernels every dense and convolution pullback is made of, each with a plain scalar
// reference twin that the tests compare it with.
//
//   gemm_nn:  C[m, n] = epilogue(bias + sum_k A(m, k) B[k, n])  (or C += A B, see Init)
//             vectorised along n (contiguous in B and C), A read by broadcast through two strides,
//             so it serves W X, W^T X and outer products alike.
//   gemm_nt:  C[m, p] += sum_k A[m, k] B[p, k]                  (dot products along contiguous k)
//   gemm_nt_nn_few: both at once for the two gradients of a layer with at most 4 outputs
//   gemv_t, gemv_rows: a matrix times one vector, along B's columns (x^T B) and along its rows (B a)
//
// Register tiles: MR rows x NR vectors of accumulators (gemm_nn's full tiles 8 x 3 = 24 of the 32
// AVX-512 registers, 4 x 2 of the 16 AVX2 registers, see panel_rows; gemm_nt's 4 x 4, see tile_vectors),
// with smaller tiles for the remainders: with AVX-512 a tile whose last vector is masked, elsewhere
// narrower vectors and a scalar tail (the same template with a scalar V).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/kernels/simd.hpp"

namespace chainlet::kernels {

using std::ptrdiff_t;
using std::size_t;

using simd::lanes;
using simd::pinned;
using simd::loadv;
using simd::storev;

// The epilogue of a kernel that writes its sums unchanged. A kernel's epilogue is any type with a static
// member template `V value(V)` applied to each result (a layer passes its activation); the kernels
// know no more of it than that.
struct NoEpilogue {
    template <class V>
    static V value(V v) { return v; }
};

// Where the accumulators of gemm_nn start: zero, C itself, a per-row or a per-column bias.
enum class Init { zero, accumulate, row_bias, col_bias };

// Offset of the k-th element along the reduction: a fixed stride, or a table (a convolution's
// patch, whose rows are not equally spaced).
struct Stride {
    ptrdiff_t step;
    ptrdiff_t operator()(size_t k) const { return static_cast<ptrdiff_t>(k) * step; }
};
// base: an offset added to every entry, so that an operand's pointer need not be moved to a place before
// its first element (a convolution tile's first pixel on an image that stores only its non-zero window,
// kernels/conv.hpp) where only the offsets actually read land inside it.
struct Table {
    const std::uint32_t* offsets;
    ptrdiff_t scale;
    ptrdiff_t base = 0;
    ptrdiff_t operator()(size_t k) const { return base + static_cast<ptrdiff_t>(offsets[k]) * scale; }
};

// The reduction indices a tile visits: `segments` runs of `length` consecutive k, the first starting at
// `first`, each `stride` after the previous. A plain product has one run [0, K); a convolution over a
// zero-padded image skips the kernel rows and columns that fall on the zeros.
struct KRange {
    size_t first, segments, length, stride;
    static KRange all(size_t K) { return {0, 1, K, K}; }
};

// One run [0, K) with K known at compile time (gemm_nn_fixed_k): a Dense layer's few inputs.
template <size_t K>
struct FixedKRange {
    static constexpr size_t first = 0, segments = 1, length = K, stride = K;
};
template <class KR>
inline constexpr size_t fixed_k = 0;
template <size_t K>
inline constexpr size_t fixed_k<FixedKRange<K>> = K;

// A row stride of A that the compiler knows to be 1: A's rows adjacent, as in W X with W stored
// input-major (a Dense layer's forward). With the stride a run-time value, GCC 12 addressed a tile's
// broadcasts through a chain of additions per k step (one per row: more integer instructions than FMAs
// in a one-vector tile); known, they are constant offsets from one pointer.
struct UnitStride {
    constexpr operator ptrdiff_t() const { return 1; }
};
inline constexpr UnitStride unit_stride{};

// Addressing of an MR x NR register tile of gemm_nn:
//   A(i, k) = a[i * a_rs + a_off(k)]                (a scalar, broadcast; a_rs a ptrdiff_t or UnitStride)
//   B(k, j) = the vector at b + b_off(k) + j * b_js
//   C(i, j) = the vector at c + i * c_is + j * c_js  (z, the pre-activation, alike, and null with
//             NoEpilogue, where C is the pre-activation; bias[i] for a
//             row bias, the vector at bias + j * c_js for a column bias)
template <class T, class AOff, class BOff, class ARowStride = ptrdiff_t, class KR = KRange>
struct Tile {
    KR k;
    const T* a;
    ARowStride a_rs;
    AOff a_off;
    const T* b;
    BOff b_off;
    ptrdiff_t b_js;
    T* c;
    ptrdiff_t c_is, c_js;
    const T* bias;
    T* z;
};

// Which of a tile's NR columns take part in which stretch of every segment of the reduction:
//   all:      every column, the whole segment (every gemm);
//   joining:  a staircase in NR stages, stage s over columns [NR - 1 - s, NR): the columns join one
//             by one from the last (a convolution tile at the left edge of its zero padding);
//   leaving:  stage s over columns [0, NR - s): they leave one by one from the last (the right edge).
// Stage s covers the offsets [stage_end[s - 1], stage_end[s]) of each segment (stage_end[-1] = 0).
enum class Columns { all, joining, leaving };

// contiguous: the NR vectors of B and of C sit side by side (b_js = c_js = one vector), known to the
// compiler (see nn_tile_run). columns: see Columns; each column still adds its products in the order of
// k, so its sums are those of the full tile less the products it skips. (A tile that chose its columns
// per stretch at run time, from up to 10 column ranges, kept its accumulators on the stack: GCC 12.)
// masked_last: the last column holds only its first last_lanes lanes (the end of a row of B and C; see
// nn_panel), loaded and stored through masks.
template <bool contiguous, class Epilogue, Init init, class V, int MR, int NR, Columns columns = Columns::all,
          bool masked_last = false, class T, class AOff, class BOff, class ARs, class KR>
inline void nn_tile_with(const Tile<T, AOff, BOff, ARs, KR>& t, const size_t* stage_end = nullptr, size_t last_lanes = 0) {
    const ptrdiff_t b_js = contiguous ? lanes<V> : t.b_js, c_js = contiguous ? lanes<V> : t.c_js;
    auto load = [&](int j, const T* p) __attribute__((always_inline)) {
        if constexpr (masked_last)
            if (j == NR - 1) return simd::load_first<V>(p, last_lanes);
        return loadv<V>(p);
    };
    auto store = [&](int j, T* p, V v) __attribute__((always_inline)) {
        if constexpr (masked_last)
            if (j == NR - 1) return simd::store_first(p, v, last_lanes);
        storev(p, v);
    };
    // Every loop over the tile fully unrolled, so that acc lives in registers: GCC 12 left the first
    // and last of these rolled in the staircase tiles, and acc then on the stack. The other tiles run
    // faster unrolled too, with the same bits.
    V acc[MR][NR];
    // Sums from 0 over every column start with the first product, a multiplication, where MR x NR
    // copies of a zero register would cost the FP pipes one operation each (x86's FMA overwrites its
    // addend, so fma(a, b, 0) needs the copies too). The same sums up to the sign of an exact zero: a sum
    // whose products are all -0 is -0 (from +0 it would be +0). The staircase tiles start from +0.
    constexpr bool first_product_starts = init == Init::zero && columns == Columns::all;
    auto set_start = [&]() __attribute__((always_inline)) {
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
            for (int j = 0; j < NR; ++j) {
                if constexpr (init == Init::zero) acc[i][j] = V(T(0));
                else if constexpr (init == Init::accumulate) acc[i][j] = load(j, t.c + i * t.c_is + j * c_js);
                else if constexpr (init == Init::row_bias) acc[i][j] = V(t.bias[i]);
                else acc[i][j] = load(j, t.bias + j * c_js);
            }
    };
    if constexpr (!first_product_starts) set_start();
    // acc[i][j] += A(i, k) B(k, j) for k in [k, k_end) and the columns [J0, J1)
    auto steps = [&]<int J0, int J1>(size_t k, size_t k_end) __attribute__((always_inline)) {
        for (; k < k_end; ++k) {
            V bv[NR];
            // addressed from the first column that takes part: the others' vectors may lie outside B
            const T* bk = t.b + (t.b_off(k) + J0 * b_js);
#pragma GCC unroll 16
            for (int j = J0; j < J1; ++j) bv[j] = pinned(load(j, bk + (j - J0) * b_js));
            const T* ak = t.a + t.a_off(k);
#pragma GCC unroll 16
            for (int i = 0; i < MR; ++i) {
                const V ai(ak[i * t.a_rs]);
#pragma GCC unroll 16
                for (int j = J0; j < J1; ++j) acc[i][j] = simd::fma(ai, bv[j], acc[i][j]);
            }
        }
    };
    size_t first_seg = 0;
    if constexpr (first_product_starts) {
        if (t.k.segments > 0 && t.k.length > 0) {
            const size_t k0 = t.k.first;
            V bv[NR];
#pragma GCC unroll 16
            for (int j = 0; j < NR; ++j) bv[j] = pinned(load(j, t.b + t.b_off(k0) + j * b_js));
            const T* ak = t.a + t.a_off(k0);
#pragma GCC unroll 16
            for (int i = 0; i < MR; ++i) {
                const V ai(ak[i * t.a_rs]);
#pragma GCC unroll 16
                for (int j = 0; j < NR; ++j) acc[i][j] = ai * bv[j];
            }
            steps.template operator()<0, NR>(k0 + 1, k0 + t.k.length);
            first_seg = 1;
        } else {
            set_start();
        }
    }
    for (size_t seg = first_seg; seg < t.k.segments; ++seg) {
        const size_t k0 = t.k.first + seg * t.k.stride;
        if constexpr (columns == Columns::all) {
            steps.template operator()<0, NR>(k0, k0 + t.k.length);
        } else {
            auto begin = [&](int st) { return k0 + (st ? stage_end[st - 1] : 0); };
            [&]<int... S>(std::integer_sequence<int, S...>) __attribute__((always_inline)) {
                if constexpr (columns == Columns::joining)
                    (steps.template operator()<NR - 1 - S, NR>(begin(S), k0 + stage_end[S]), ...);
                else
                    (steps.template operator()<0, NR - S>(begin(S), k0 + stage_end[S]), ...);
            }(std::make_integer_sequence<int, NR>{});
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) {
            // Without an epilogue C is the pre-activation and z is null (gemm_nn asserts it); known at
            // compile time, so that the z branch's store addresses do not spill the tile's registers.
            if constexpr (!std::is_same_v<Epilogue, NoEpilogue>)
                if (t.z) store(j, t.z + i * t.c_is + j * c_js, acc[i][j]);
            store(j, t.c + i * t.c_is + j * c_js, Epilogue::value(acc[i][j]));
        }
}

// The tile with the strides t gives (the convolutions' pixels are IC x n apart).
template <class Epilogue, Init init, class V, int MR, int NR, Columns columns = Columns::all, class T, class AOff,
          class BOff, class ARs, class KR>
inline void nn_tile(const Tile<T, AOff, BOff, ARs, KR>& t, const size_t* stage_end = nullptr) {
    nn_tile_with<false, Epilogue, init, V, MR, NR, columns>(t, stage_end);
}

// The same tile moved to row m, and by `shift` elements along the vectorised dimension.
template <Init init, class T, class AOff, class BOff, class ARs, class KR>
inline Tile<T, AOff, BOff, ARs, KR> moved(Tile<T, AOff, BOff, ARs, KR> t, size_t m, ptrdiff_t shift) {
    t.a += static_cast<ptrdiff_t>(m) * t.a_rs;
    t.b += shift;
    t.c += static_cast<ptrdiff_t>(m) * t.c_is + shift;
    if (t.z) t.z += static_cast<ptrdiff_t>(m) * t.c_is + shift;
    if constexpr (init == Init::row_bias) t.bias += m;
    if constexpr (init == Init::col_bias) t.bias += shift;
    return t;
}

// Vectors along a register tile's wide side: MR x 4 accumulators with 32 vector registers (AVX-512),
// MR x 2 with 16 (AVX2): 4 x 4 accumulators, the B vectors and a broadcast do not fit 16 registers, and
// GCC then keeps accumulators on the stack.
inline constexpr int tile_vectors = simd::vector_registers >= 32 ? 4 : 2;

// Rows of nn_panel's tiles of a single vector: 16 with 32 vector registers, 8 with 16 (then 8
// accumulators, the B vector and a broadcast). More rows share each B vector: the Dense forwards on a
// chunk of one vector run faster with 16 than with 8, their input gradients the same.
inline constexpr int one_vector_rows = simd::vector_registers >= 32 ? 16 : 8;

// nn_panel's full tiles: panel_rows x panel_vectors accumulators, 8 x 3 with 32 vector registers (24
// accumulators, 3 B vectors and a broadcast; 11 loads per 24 FMAs against 8 per 16 in 4 x 4), 4 x 2 with
// 16.
inline constexpr int panel_rows = simd::vector_registers >= 32 ? 8 : 4;
inline constexpr int panel_vectors = simd::vector_registers >= 32 ? 3 : 2;

// A reduction of at most short_reduction terms known at compile time (gemm_nn_fixed_k) takes tiles of
// short_reduction_rows rows and one vector with 32 vector registers: with so few FMAs per output the
// tile's stores and epilogue weigh more than its loads, and a tall tile of one vector does them with
// fewer instructions than 8 x 3 (the tiny MLP's first layer, 4 inputs with tanh).
inline constexpr size_t short_reduction = 8;
inline constexpr int short_reduction_rows = 16;

// Calls tile<MR>(m) over the rows [0, M) in blocks of B (4 unless asked: conv_valid asks for 6 where the
// channels are a multiple of 6, nn_panel one_vector_rows or 8, conv_weight_grad_one_along_pixels 5 or 3
// for a kernel row and 3 or 2 for channels), then 8 (after 16), 4 (after 8 or 16), 2, 1.
// Always inlined, so that a caller's always-inlined tile lambda (conv_valid) is inlined all the way.
template <int B = 4, class F>
[[gnu::always_inline]] inline void for_row_blocks(size_t M, F&& tile) {
    size_t m = 0;
    for (const size_t m_end = M - M % B; m < m_end; m += B) tile.template operator()<B>(m);
    if constexpr (B == 16)
        if (M - m >= 8) {
            tile.template operator()<8>(m);
            m += 8;
        }
    if constexpr (B >= 8)
        if (M - m >= 4) {
            tile.template operator()<4>(m);
            m += 4;
        }
    if constexpr (B > 2)
        for (; M - m >= 2; m += 2) tile.template operator()<2>(m);
    if (m < M) tile.template operator()<1>(m);
}

// The tiles of row block m from n to n_end (NR vectors of V each), contiguous. A function of its own
// for each tile shape, never inlined: with every shape's loop in one function (nn_panel's lambda) and
// the tile read through a reference, GCC 12 kept accumulators of the full tile on the stack (an FMA with
// a memory operand and a store per update), in float and double. Flattened for the reason given at
// nn_tiles_by_column.
template <class Epilogue, Init init, class V, int MR, int NR, class T, class AOff, class BOff, class ARs, class KR>
[[gnu::noinline, gnu::flatten]] void nn_tile_run(const Tile<T, AOff, BOff, ARs, KR>& t, size_t m, size_t n, size_t n_end) {
    for (; n < n_end; n += NR * lanes<V>)
        nn_tile_with<true, Epilogue, init, V, MR, NR>(moved<init>(t, m, static_cast<ptrdiff_t>(n)));
}

// The MR x NR tiles of rows [0, m_end) and columns [0, n_end), a column block's tiles one after the
// other: the block's K x NR vectors of B stay in L1 while every row block uses them (row blocks first
// read all of B again for each row block). Flattened: GCC 12 otherwise called the tile out of line
// where another function used the same tile shape.
template <class Epilogue, Init init, class V, int MR, int NR, class T, class AOff, class BOff, class ARs, class KR>
[[gnu::noinline, gnu::flatten]] void nn_tiles_by_column(const Tile<T, AOff, BOff, ARs, KR>& t, size_t m_end,
                                                        size_t n_end) {
    for (size_t n = 0; n < n_end; n += NR * lanes<V>)
        for (size_t m = 0; m < m_end; m += MR)
            nn_tile_with<true, Epilogue, init, V, MR, NR>(moved<init>(t, m, static_cast<ptrdiff_t>(n)));
}

// One MR x NV tile at column n of row block m whose last vector holds last_lanes lanes (nn_panel).
template <class Epilogue, Init init, class V, int MR, int NV, class T, class AOff, class BOff, class ARs, class KR>
[[gnu::noinline, gnu::flatten]] void nn_tile_masked(const Tile<T, AOff, BOff, ARs, KR>& t, size_t m, size_t n,
                                                    size_t last_lanes) {
    nn_tile_with<true, Epilogue, init, V, MR, NV, Columns::all, true>(moved<init>(t, m, static_cast<ptrdiff_t>(n)),
                                                                      nullptr, last_lanes);
}

// Whether nn_panel runs the columns past its full tiles as tiles with a masked last vector: where
// vec<T> has mask registers (AVX-512; simd::load_first, store_first).
template <class T>
inline constexpr bool masked_tail_tiles = simd::has_masked_lanes<simd::vec<T>>;

// All of C for a tile description t whose vectorised dimension (contiguous in B and C, the vectors of a
// tile side by side) has length N: panel_rows x panel_vectors tiles, a column block at a time
// (nn_tiles_by_column; the rows past the last whole block of rows in smaller tiles), then the columns
// they leave. With AVX-512, when these end in a part of a vector, a column of tiles of up to
// panel_vectors vectors, the last one masked. Otherwise the rest of the whole vectors as one tile of 2
// vectors (AVX-512), or of one vector and one_vector_rows rows; then (without AVX-512) a half- and a
// quarter-width vector of 8 rows where the type has them; scalars — each in a pass over the rows of its
// own. Every tile keeps at least 8
// accumulators where it can: two FMA pipes of latency 4 need 8 independent sums, and a 4 x 1 tile
// (LeNet5's Dense layers on a chunk of 16 samples, one AVX-512 vector) held an Intel core with two
// 512-bit pipes to half its peak. The tile shape does not change a sum: each output adds its products
// in the order of k.
template <class Epilogue, Init init, class T, class AOff, class BOff, class ARs, class KR>
void nn_panel(size_t M, size_t N, const Tile<T, AOff, BOff, ARs, KR>& t) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    // A short reduction known at compile time takes tiles of one vector (see short_reduction_rows)
    constexpr bool one_vector_tiles = fixed_k<KR> > 0 && fixed_k<KR> <= short_reduction && simd::vector_registers >= 32;
    constexpr int NR = one_vector_tiles ? 1 : panel_vectors;
    constexpr int PR = one_vector_tiles ? short_reduction_rows : panel_rows;
    size_t n = 0;
    if constexpr (simd::enabled) {
        const size_t full_tiles_end = N - N % (NR * W), vectors_end = N - N % W;
        if (full_tiles_end > 0) {
            const size_t rows_end = M - M % PR;
            if (rows_end > 0) nn_tiles_by_column<Epilogue, init, V, PR, NR>(t, rows_end, full_tiles_end);
            for_row_blocks(M - rows_end, [&]<int MR>(size_t m) {
                nn_tile_run<Epilogue, init, V, MR, NR>(t, rows_end + m, 0, full_tiles_end);
            });
        }
        // Columns that end in a part of a vector: with masks, a column of MR x NV tiles down the rows whose
        // last vector is masked, instead of the tiles below, which run the part in narrower vectors and
        // scalars, each in a pass over the rows of its own (for 10 columns, the two scalar columns cost
        // more than the eight of the half vector). The masked lanes compute on zeros and are never
        // stored. The sums are those of
        // the tiles below; the epilogue is the vector form in every column, where the scalar columns
        // below take the scalar form (std::exp and the like for sigmoid, softplus, GELU, whose xsimd
        // forms may differ in the last bit).
        if constexpr (masked_tail_tiles<T>) {
            const size_t rest = N - full_tiles_end;
            if (rest % W != 0) {
                [&]<int... R>(std::integer_sequence<int, R...>) {
                    (..., [&] {
                        constexpr int NV = R + 1;
                        if ((rest + W - 1) / W != NV) return;
                        for_row_blocks<PR>(M, [&]<int MR>(size_t m) {
                            nn_tile_masked<Epilogue, init, V, MR, NV>(t, m, full_tiles_end, rest % W);
                        });
                    }());
                }(std::make_integer_sequence<int, NR>{});
                return;
            }
        }
        // the whole vectors left: 1 .. NR - 1 of them, side by side in one tile
        [&]<int... R>(std::integer_sequence<int, R...>) {
            (..., [&] {
                constexpr int NV = R + 1;
                if (vectors_end - full_tiles_end != NV * W) return;
                constexpr int B = NV == 1 ? one_vector_rows : 4;
                for_row_blocks<B>(M, [&]<int MR>(size_t m) {
                    nn_tile_run<Epilogue, init, V, MR, NV>(t, m, full_tiles_end, vectors_end);
                });
            }());
        }(std::make_integer_sequence<int, NR - 1>{});
        n = vectors_end;
        auto part_vector = [&]<class P>() {
            if (N - n < lanes<P>) return;
            for_row_blocks<8>(M, [&]<int MR>(size_t m) {
                nn_tile_run<Epilogue, init, P, MR, 1>(t, m, n, n + lanes<P>);
            });
            n += lanes<P>;
        };
        using H = simd::sized_vec<T, W / 2>;
        if constexpr (W >= 8 && !std::is_void_v<H>) part_vector.template operator()<H>();
        using Q = simd::sized_vec<T, W / 4>;
        if constexpr (W >= 16 && !std::is_void_v<Q>) part_vector.template operator()<Q>();
    }
    if (n < N)
        for_row_blocks(M, [&]<int MR>(size_t m) { nn_tile_run<Epilogue, init, T, MR, 1>(t, m, n, N); });
}

// C (M x N, row stride ldc) = Epilogue(start + A B), A(m, k) = a[m * a_rs + k * a_cs], B row stride ldb.
// start: 0, C, bias[m] or bias[n] according to `init`. With an epilogue, if z is given (row stride ldc) it
// receives the pre-activation; with NoEpilogue C is the pre-activation and z must be null (asserted; the
// tiles ignore it). a_rs: an integer, or unit_stride where A's rows are adjacent (see UnitStride).
// The reduction k: KRange::all(K) (gemm_nn) or FixedKRange<K> (gemm_nn_fixed_k).
template <class Epilogue, Init init, class T, class ARowStride, class KR>
[[gnu::always_inline]] inline void gemm_nn_over(size_t M, size_t N, KR k, const T* a, ARowStride a_rs, ptrdiff_t a_cs,
                                                const T* b, size_t ldb, T* c, size_t ldc, const T* bias, T* z) {
    static_assert(init != Init::accumulate || std::is_same_v<Epilogue, NoEpilogue>, "accumulation has no epilogue");
    assert((!std::is_same_v<Epilogue, NoEpilogue> || z == nullptr) && "gemm_nn: no pre-activation without an epilogue");
    static_assert(std::is_integral_v<ARowStride> || std::is_same_v<ARowStride, UnitStride>,
                  "gemm_nn: A's row stride is an integer or unit_stride");
    // every integer type as ptrdiff_t, so that the tiles are compiled once for all of them
    using RowStride = std::conditional_t<std::is_same_v<ARowStride, UnitStride>, UnitStride, ptrdiff_t>;
    constexpr ptrdiff_t W = simd::width<T>;
    const Tile<T, Stride, Stride, RowStride, KR> t{k, a, RowStride(a_rs), Stride{a_cs},
                                                   b, Stride{static_cast<ptrdiff_t>(ldb)}, W,
                                                   c, static_cast<ptrdiff_t>(ldc), W, bias, z};
    nn_panel<Epilogue, init>(M, N, t);
}

template <class Epilogue, Init init, class T, class ARowStride>
void gemm_nn(size_t M, size_t N, size_t K, const T* a, ARowStride a_rs, ptrdiff_t a_cs, const T* b, size_t ldb,
             T* c, size_t ldc, std::type_identity_t<const T*> bias = nullptr, std::type_identity_t<T*> z = nullptr) {
    gemm_nn_over<Epilogue, init>(M, N, KRange::all(K), a, a_rs, a_cs, b, ldb, c, ldc, bias, z);
}

// gemm_nn with K known at compile time: up to short_reduction, tiles of one vector (nn_panel). The same
// sums as gemm_nn's, bit for bit. Not from zero: there a sum starts with a multiplication, and in the
// unrolled sum GCC 12 (-O3) rounded another of its products instead (1 ulp off gemm_nn; tests/test_kernels.cpp).
template <size_t K, class Epilogue, Init init, class T, class ARowStride>
void gemm_nn_fixed_k(size_t M, size_t N, const T* a, ARowStride a_rs, ptrdiff_t a_cs, const T* b, size_t ldb, T* c,
                     size_t ldc, std::type_identity_t<const T*> bias = nullptr, std::type_identity_t<T*> z = nullptr) {
    static_assert(init != Init::zero, "gemm_nn_fixed_k: a sum from zero is gemm_nn's");
    gemm_nn_over<Epilogue, init>(M, N, FixedKRange<K>{}, a, a_rs, a_cs, b, ldb, c, ldc, bias, z);
}

template <class Epilogue, Init init, class T>
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
            c[m * ldc + n] = Epilogue::value(s);
        }
}

// C[m, p] += sum_k A[m, k] B[p, k] over an MR x PR tile, B's rows made by b (elementwise.hpp's rows):
// vector partial sums along k, one horizontal sum per output at the end. Each B vector is made once and
// used from registers by the MR rows of A, and with ones_row by one more row of sums whose A is all ones:
// db[p] += sum_k B[p, k]. use_b(k, bv) is called with the PR B vectors of every k step (and with the PR
// values of every k past the vectors) after A's rows used them: the input gradient of a layer with at
// most 4 outputs (gemm_nt_nn_few) is made from them there.
struct NoBUse {
    template <class V>
    void operator()(size_t, const V*) const {}
};
template <int MR, int PR, bool ones_row = false, class T, class BRows, class BUse = NoBUse>
inline void nt_tile(size_t K, const T* a, size_t lda, BRows b, T* c, size_t ldc, T* db = nullptr, BUse use_b = {}) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    constexpr int R = MR + (ones_row ? 1 : 0);
    T out[R][PR] = {};
    size_t k = 0;
    if constexpr (simd::enabled) {
        if (K >= W) {
            V acc[R][PR];
#pragma GCC unroll 16
            for (int i = 0; i < R; ++i)
#pragma GCC unroll 16
                for (int j = 0; j < PR; ++j) acc[i][j] = V(T(0));
            for (const size_t k_end = K - K % W; k < k_end; k += W) {
                V bv[PR];
#pragma GCC unroll 16
                for (int j = 0; j < PR; ++j) bv[j] = b.template make<V>(size_t(j), k);
#pragma GCC unroll 16
                for (int i = 0; i < MR; ++i) {
                    const V ai = pinned(loadv<V>(a + i * lda + k));
#pragma GCC unroll 16
                    for (int j = 0; j < PR; ++j) acc[i][j] = simd::fma(ai, bv[j], acc[i][j]);
                }
                if constexpr (ones_row)
#pragma GCC unroll 16
                    for (int j = 0; j < PR; ++j) acc[MR][j] += bv[j];
                use_b(k, bv);
            }
            simd::hsum_add<T, R * PR>(&acc[0][0], &out[0][0]);
        }
    }
    // The fused multiply-add written out: left to contraction, GCC 12 fused it in some instantiations
    // and not in others (where it vectorised the adds across j), so equal sums could differ in the last bit.
    for (; k < K; ++k) {
        T bk[PR];
        for (int j = 0; j < PR; ++j) {
            const T z = bk[j] = b.template make<T>(size_t(j), k);
            for (int i = 0; i < MR; ++i) out[i][j] = simd::fma(a[i * lda + k], z, out[i][j]);
            if constexpr (ones_row) out[MR][j] += z;
        }
        use_b(k, bk);
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < PR; ++j) c[i * ldc + j] += out[i][j];
    if constexpr (ones_row)
        for (int j = 0; j < PR; ++j) db[j] += out[MR][j];
}

// A single row (the input gradient of one sample) takes 8 outputs per tile where a vector holds 64
// bytes: its 8 sums are then reduced together (simd::hsum_add), not one by one.
template <int MR, class T>
inline void nt_rows(size_t P, size_t K, const T* a, size_t lda, const T* b, size_t ldb, T* c, size_t ldc) {
    constexpr int PR = MR > 1 ? tile_vectors : simd::width<T> * sizeof(T) == 64 ? 8 : 4;
    size_t p = 0;
    for (const size_t p_end = P - P % (PR); p < p_end; p += PR)
        nt_tile<MR, PR>(K, a, lda, detail::StoredRows<T>{b + p * ldb, ldb}, c + p, ldc);
    for (; p < P; ++p) nt_tile<MR, 1>(K, a, lda, detail::StoredRows<T>{b + p * ldb, ldb}, c + p, ldc);
}

// C (M x P, row stride ldc) += A (M x K, row stride lda) B^T, B (P x K, row stride ldb).
template <class T>
void gemm_nt(size_t M, size_t P, size_t K, const T* a, size_t lda, const T* b, size_t ldb, T* c, size_t ldc) {
    constexpr int MR = 4;
    size_t m = 0;
    for (const size_t m_end = M - M % (MR); m < m_end; m += MR) nt_rows<MR>(P, K, a + m * lda, lda, b, ldb, c + m * ldc, ldc);
    for (; m < M; ++m) nt_rows<1>(P, K, a + m * lda, lda, b, ldb, c + m * ldc, ldc);
}

// The weight and input gradients of a layer with P <= 4 outputs (the last layer of an MLP), from its dz
// (P x K, row stride ld) in one pass; dx may be null (then only C, with the same sums: a layer's weight
// gradient does not depend on whether its input gradient is wanted, which the layer checker requires):
//   C[m, p] += sum_k A[m, k] dz[p, k]     (gemm_nt: C = dW, A = x, M x K, row stride lda)
//   dx[m, k] = sum_p w[m * P + p] dz[p, k] (gemm_nn with A = W, Init::zero; row stride ldx)
// Each tile of 4 rows of A (2 for P > 2 with 16 vector registers) loads P dz vectors per k step for its
// FMAs with A's rows and makes those rows' dx vectors from the same registers. Separately, gemm_nt loaded each dz vector for 4 FMAs and
// gemm_nn read dz again for dx: the two took nearly twice their time at the FMA peak. The sums are
// theirs, in the same order: C's are
// nt_tile's (gemm_nt's bits for P = 4 and whole tiles of 4 rows; its other tiles group the horizontal
// sums differently), dx's start from 0 and add p = 0, 1, ... by FMA (gemm_nn's bits, up to the sign of an
// exact zero (gemm_nn starts with the first product), where it takes whole
// vectors; tested).
template <size_t P, class T>
void gemm_nt_nn_few(size_t M, size_t K, const T* a, size_t lda, const T* dz, size_t ld, const T* w, T* c,
                    size_t ldc, T* dx, size_t ldx) {
    static_assert(P >= 1 && P <= 4, "gemm_nt_nn_few: at most 4 outputs");
    auto rows = [&]<int MR>(size_t m) {
        // dx's rows m .. m + MR from the tile's B vectors (or values past them) at k
        auto input_gradient = [&]<class V>(size_t k, const V* bv) __attribute__((always_inline)) {
#pragma GCC unroll 4
            for (int i = 0; i < MR; ++i) {
                const T* wi = w + (m + size_t(i)) * P;
                V d = simd::fma(V(wi[0]), bv[0], V(T(0)));
#pragma GCC unroll 4
                for (size_t p = 1; p < P; ++p) d = simd::fma(V(wi[p]), bv[p], d);
                if constexpr (std::is_same_v<V, T>) dx[(m + size_t(i)) * ldx + k] = d;
                else storev(dx + (m + size_t(i)) * ldx + k, d);
            }
        };
        const detail::StoredRows<T> b{dz, ld};
        if (dx) nt_tile<MR, int(P)>(K, a + m * lda, lda, b, c + m * ldc, ldc, static_cast<T*>(nullptr), input_gradient);
        else nt_tile<MR, int(P)>(K, a + m * lda, lda, b, c + m * ldc, ldc);
    };
    // tiles of 4 rows, or 2 where 4 x P accumulators would not leave registers for the P dz vectors
    constexpr int MR = simd::vector_registers >= 32 || P <= 2 ? 4 : 2;
    size_t m = 0;
    for (const size_t m_end = M - M % MR; m < m_end; m += MR) rows.template operator()<MR>(m);
    for (; m < M; ++m) rows.template operator()<1>(m);
}

template <class T>
void gemm_nt_nn_few_reference(size_t M, size_t P, size_t K, const T* a, size_t lda, const T* dz, size_t ld,
                              const T* w, T* c, size_t ldc, T* dx, size_t ldx) {
    for (size_t m = 0; m < M; ++m)
        for (size_t p = 0; p < P; ++p) {
            T s = 0;
            for (size_t k = 0; k < K; ++k) s += a[m * lda + k] * dz[p * ld + k];
            c[m * ldc + p] += s;
        }
    for (size_t m = 0; m < M; ++m)
        for (size_t k = 0; k < K; ++k) {
            T s = 0;
            for (size_t p = 0; p < P; ++p) s += w[m * P + p] * dz[p * ld + k];
            dx[m * ldx + k] = s;
        }
}

// The pullback of a layer y = act(W x + b) with at most 4 inputs (or of a wider layer's first 4: Dense),
// except its input gradient, in one pass:
//   dz[p, k] = Act::pullback(dy[p, k], s[p, k])   (written back to dy if store_dz, for an input gradient)
//   C[m, p] += sum_k A[m, k] dz[p, k]            (m < M; dy and s have row stride ld)
//   db[p] += sum_k dz[p, k]                       (if db is not null)
// The tiles are gemm_nt's nt_tile with dz made in registers; with M = 4, C's sums are gemm_nt's bit for
// bit (tested); with fewer rows each lane adds along k as there, but the lanes may be summed in another
// order (hsum_add reduces a tile's vectors in groups). The bias sums are made the same way (lane by lane along k, then the lanes), not
// in row_sums_add's order (two alternating vectors). Separate passes
// (activation_pullback, gemm_nt, row_sums_add) wrote dz and read it back twice, and their tiles loaded
// each x vector for only 4 FMAs.
template <class Act, size_t M, class T>
void gemm_nt_activation(size_t P, size_t K, const T* a, size_t lda, T* dy, const T* s, size_t ld, T* c,
                        size_t ldc, T* db, bool store_dz) {
    static_assert(M >= 1 && M <= 4, "gemm_nt_activation: at most 4 rows of A in a tile");
    auto rows = [&]<bool bias, bool store>() {
        constexpr int PR = tile_vectors;
        using DzRows = detail::ActivationPullbackRows<Act, store, T>;
        size_t p = 0;
        for (const size_t p_end = P - P % PR; p < p_end; p += PR)
            nt_tile<int(M), PR, bias>(K, a, lda, DzRows{dy + p * ld, s + p * ld, ld}, c + p, ldc, db + (bias ? p : 0));
        for (; p < P; ++p)
            nt_tile<int(M), 1, bias>(K, a, lda, DzRows{dy + p * ld, s + p * ld, ld}, c + p, ldc, db + (bias ? p : 0));
    };
    if (db) store_dz ? rows.template operator()<true, true>() : rows.template operator()<true, false>();
    else store_dz ? rows.template operator()<false, true>() : rows.template operator()<false, false>();
}

template <class Act, class T>
void gemm_nt_activation_reference(size_t M, size_t P, size_t K, const T* a, size_t lda, T* dy, const T* s,
                                  size_t ld, T* c, size_t ldc, T* db, bool store_dz) {
    for (size_t p = 0; p < P; ++p) {
        T sum = 0;
        for (size_t k = 0; k < K; ++k) {
            const T z = Act::pullback(dy[p * ld + k], s[p * ld + k]);
            if (store_dz) dy[p * ld + k] = z;
            sum += z;
            for (size_t m = 0; m < M; ++m) c[m * ldc + p] += a[m * lda + k] * z;
        }
        if (db) db[p] += sum;
    }
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

// gemv_t's NV output vectors V at n. Four partial sums per output vector break the FMA dependency chain
// along k (latency 4, which a single chain would pay K times); two output vectors at once give the FMA
// pipes eight independent chains (with one, a 32-input layer waits on the latency). Each vector's sums
// are the same either way.
template <class V, size_t NV, class Epilogue, class T>
[[gnu::always_inline]] inline void gemv_t_block(size_t n, size_t K, const T* x, const T* b, size_t ldb, const T* bias,
                                                T* y, T* z) {
    constexpr size_t L = simd::lanes<V>;
    V s[NV][4];
#pragma GCC unroll 4
    for (size_t v = 0; v < NV; ++v) {
        s[v][0] = simd::loadv<V>(bias + n + v * L);
        s[v][1] = s[v][2] = s[v][3] = V(T(0));
    }
    size_t k = 0;
    for (const size_t k_end = K - K % (4); k < k_end; k += 4)
#pragma GCC unroll 4
        for (size_t v = 0; v < NV; ++v)
#pragma GCC unroll 4
            for (size_t j = 0; j < 4; ++j)
                s[v][j] = simd::fma(V(x[k + j]), simd::loadv<V>(b + (k + j) * ldb + n + v * L), s[v][j]);
    for (; k < K; ++k)
#pragma GCC unroll 4
        for (size_t v = 0; v < NV; ++v) s[v][0] = simd::fma(V(x[k]), simd::loadv<V>(b + k * ldb + n + v * L), s[v][0]);
#pragma GCC unroll 4
    for (size_t v = 0; v < NV; ++v) {
        const V sum = (s[v][0] + s[v][1]) + (s[v][2] + s[v][3]);
        if (z) simd::storev(z + n + v * L, sum);
        simd::storev(y + n + v * L, Epilogue::value(sum));
    }
}

// gemv_t's outputs [n, N) in vectors V of L lanes, as far as whole vectors reach; returns where it stopped.
template <class V, class Epilogue, class T>
inline size_t gemv_t_vectors(size_t n, size_t N, size_t K, const T* x, const T* b, size_t ldb, const T* bias, T* y,
                             T* z) {
    constexpr size_t L = simd::lanes<V>;
    const size_t n_end = N - (N - n) % L;  // n <= N on entry
    for (; n + 2 * L <= n_end; n += 2 * L) gemv_t_block<V, 2, Epilogue>(n, K, x, b, ldb, bias, y, z);
    for (; n < n_end; n += L) gemv_t_block<V, 1, Epilogue>(n, K, x, b, ldb, bias, y, z);
    return n;
}

// y[n] = epilogue(bias[n] + sum_k x[k] B[k, n]): the one-sample dense forward. Outputs past the last
// full vector take a half- and a quarter-width vector where they fit: the 4-output last layer of the
// tiny MLP otherwise ran 4 scalar chains of K dependent FMAs. (The vector loops are a function, not a
// lambda: GCC 12 compiled the lambda worse where bias == y, the GRU's one-sequence inference.)
template <class Epilogue, class T>
void gemv_t(size_t N, size_t K, const T* x, const T* b, size_t ldb, const T* bias, T* y,
            std::type_identity_t<T*> z = nullptr) {
    constexpr size_t W = simd::width<T>;
    size_t n = 0;
    if constexpr (simd::enabled) {
        n = gemv_t_vectors<simd::vec<T>, Epilogue>(n, N, K, x, b, ldb, bias, y, z);
        using H = simd::sized_vec<T, W / 2>;
        if constexpr (W >= 8 && !std::is_void_v<H>) n = gemv_t_vectors<H, Epilogue>(n, N, K, x, b, ldb, bias, y, z);
        using Q = simd::sized_vec<T, W / 4>;
        if constexpr (W >= 16 && !std::is_void_v<Q>) n = gemv_t_vectors<Q, Epilogue>(n, N, K, x, b, ldb, bias, y, z);
    }
    for (; n < N; ++n) {
        T s = bias[n];
        for (size_t k = 0; k < K; ++k) s += x[k] * b[k * ldb + n];
        if (z) z[n] = s;
        y[n] = Epilogue::value(s);
    }
}

// gemv_t with N and K known at compile time and B stored with row stride N, as a function of its own
// that is never inlined: the one-sample forward of a Dense layer, specialised for the layer's shape
// whichever way GCC decides to inline elsewhere. Called directly, gemv_t's code depended on the rest of
// the program (inlined into a chain's forward, it lost its constant sizes and ran slower).
template <class Epilogue, size_t N, size_t K, class T>
[[gnu::noinline, gnu::flatten]] void gemv_t_fixed(const T* x, const T* b, const T* bias, T* y, T* z) {
    gemv_t<Epilogue>(N, K, x, b, N, bias, y, z);
}

// c[p] = sum_k B[p, k] a[k] for P rows of B (row stride ldb), written, not added: a matrix-vector
// product along B's contiguous rows, the input gradient of one sample (Dense: dx = W dz, W stored
// input-major). Rows go G at a time, each with its own accumulator, and the G sums are reduced together
// (one transposing tree: simd::hsum_store, or haddp for a half or quarter vector), in the widest vector
// that K fills. gemm_nt with one
// row did this before: on AVX2 its tiles of 4 rows each paid a horizontal sum (the grouped reduction
// takes 8), and a K below the vector width (the tiny MLP's 4 outputs) ran in scalar: the largest part
// of the tiny MLP's one-sample forward + pullback.
template <class V, class T>
[[gnu::always_inline]] inline size_t gemv_rows_vectors(size_t P, size_t K, const T* b, size_t ldb, const T* a, T* c) {
    constexpr size_t L = lanes<V>;
    constexpr bool full = std::is_same_v<V, simd::vec<T>>;
    // hsums reduces AVX-512 float in groups of 8 (see there); every other vector in groups of its lanes
    constexpr size_t G = full && std::is_same_v<T, float> && L == 16 ? 8 : L;
    const size_t k_vec = K - K % L, p_end = P - P % G;
    for (size_t p = 0; p < p_end; p += G) {
        V acc[G];
#pragma GCC unroll 16
        for (size_t r = 0; r < G; ++r) acc[r] = loadv<V>(b + (p + r) * ldb) * loadv<V>(a);
        for (size_t k = L; k < k_vec; k += L) {
            const V ak = loadv<V>(a + k);
#pragma GCC unroll 16
            for (size_t r = 0; r < G; ++r) acc[r] = simd::fma(loadv<V>(b + (p + r) * ldb + k), ak, acc[r]);
        }
        if constexpr (full) simd::hsum_store<T, G>(acc, c + p);
        else storev(c + p, simd::haddp(acc));
        for (size_t k = k_vec; k < K; ++k)
            for (size_t r = 0; r < G; ++r) c[p + r] = simd::fma(b[(p + r) * ldb + k], a[k], c[p + r]);
    }
    return p_end;
}

template <class T>
[[gnu::always_inline]] inline void gemv_rows(size_t P, size_t K, const T* b, size_t ldb, const T* a, T* c) {
    constexpr size_t W = simd::width<T>;
    size_t p = 0;
    if constexpr (simd::enabled) {
        using H = simd::sized_vec<T, W / 2>;
        using Q = simd::sized_vec<T, W / 4>;
        if (K >= W) p = gemv_rows_vectors<simd::vec<T>>(P, K, b, ldb, a, c);
        else if constexpr (W >= 4 && !std::is_void_v<H>) {
            if (K >= W / 2) p = gemv_rows_vectors<H>(P, K, b, ldb, a, c);
            else if constexpr (W >= 8 && !std::is_void_v<Q>) {
                if (K >= W / 4) p = gemv_rows_vectors<Q>(P, K, b, ldb, a, c);
            }
        }
    }
    for (; p < P; ++p) {  // the rows after the last whole group
        T s = 0;
        for (size_t k = 0; k < K; ++k) s = simd::fma(b[p * ldb + k], a[k], s);
        c[p] = s;
    }
}

template <class T>
void gemv_rows_reference(size_t P, size_t K, const T* b, size_t ldb, const T* a, T* c) {
    for (size_t p = 0; p < P; ++p) {
        T s = 0;
        for (size_t k = 0; k < K; ++k) s += b[p * ldb + k] * a[k];
        c[p] = s;
    }
}

template <class Epilogue, class T>
void gemv_t_reference(size_t N, size_t K, const T* x, const T* b, size_t ldb, const T* bias, T* y,
                      std::type_identity_t<T*> z = nullptr) {
    for (size_t n = 0; n < N; ++n) {
        T s = bias[n];
        for (size_t k = 0; k < K; ++k) s += x[k] * b[k * ldb + n];
        if (z) z[n] = s;
        y[n] = Epilogue::value(s);
    }
}

}  // namespace chainlet::kernels
