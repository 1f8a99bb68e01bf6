// Convolution kernels on feature-major chunks: an image of H x W pixels and C channels is H * W * C
// rows of n samples, row (y * W + x) * C + c. Stride 1, no padding here (the layer pads into scratch).
//
//   conv_valid:       out = act(bias + correlate(in, weights)); the same routine, with the kernel
//                     flipped and the channels swapped, gives the input gradient of a convolution.
//   conv_weight_grad: g[k, oc] += sum over output pixels and samples of patch_k * dz_oc.
//   conv_input_grad_one: a convolution's input gradient for one sample, vectors along the channels.
//   conv_weight_grad_one_along_pixels: one sample's weight and bias gradients of a convolution with one
//                     input channel, vectors along the output pixels.
//   activation_pullback_channel_sums: dz = act'(z) dy in place, and the bias gradient, the sum over
//                     pixels and samples of dz per channel.
//   conv_activation_parameter_grads: the two above, in bands of output rows where dz exceeds L1, or
//                     with dz also copied in blocks of 4 channels (conv_dz_blocks).
//   conv_activation_parameter_grads_banded: the banded route, with the caller providing each band's dy.
//   pad_copy_sides:   copies an image into the rows of a larger one that conv_valid reads, with zeros
//                     beside it; pad_copy also zeroes the rows above and below.
//
// conv_valid's register tiles run along 4 neighbouring output pixels (not along the samples), so a chunk
// of a single SIMD vector of samples (16 in float) still fills a 4 x 4 tile; conv_weight_grad's run along
// kernel rows and output channels (see there).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "chainlet/kernels/gemm.hpp"

namespace chainlet::kernels {

// Row offsets of a KH x KW x C patch relative to its top-left row, in an image W pixels wide:
// patch[(ky * KW + kx) * C + c] = (ky * W + kx) * C + c, into out[0, KH * KW * C).
constexpr void patch_offsets(std::size_t KH, std::size_t KW, std::size_t C, std::size_t W, std::uint32_t* out) {
    for (std::size_t ky = 0; ky < KH; ++ky)
        for (std::size_t kx = 0; kx < KW; ++kx)
            for (std::size_t c = 0; c < C; ++c) out[(ky * KW + kx) * C + c] = static_cast<std::uint32_t>((ky * W + kx) * C + c);
}

// The same as a table of the layer's (compile-time) shape.
template <std::size_t KH, std::size_t KW, std::size_t C, std::size_t W>
constexpr std::array<std::uint32_t, KH * KW * C> patch_offsets() {
    std::array<std::uint32_t, KH * KW * C> t{};
    patch_offsets(KH, KW, C, W, t.data());
    return t;
}

// Geometry of one valid correlation: input IH x IW x IC (after any padding), KH x KW kernel, OC outputs.
// Only input rows [row0, row1) and columns [col0, col1) may be non-zero (the rest is zero padding),
// so kernel taps that fall outside that window are skipped.
// window_only: the input stores the window alone, pixel (y, x) of the padded image at row
// ((y - row0) * IW + x - col0) * IC, with IW = col1 - col0 and patch built for that width; conv_valid then
// never reads a zero of the padding (with Edges::window_only, or any Edges where the window spans every
// column). A convolution's input gradient reads its output gradient so, without a padded copy.
struct ConvShape {
    size_t IW, IC, OH, OW, OC, KH, KW;
    const std::uint32_t* patch;  // KH * KW * IC row offsets of the patch (patch_offsets)
    size_t row0, row1, col0, col1;
    bool window_only = false;
    constexpr size_t K() const { return KH * KW * IC; }
    // The input row where output pixel (oy, ox)'s tap (0, 0) would be, in the image's storage (negative
    // for a window-only image where that tap falls in the padding above or left of it).
    constexpr ptrdiff_t origin(size_t oy, size_t ox) const {
        const auto y = static_cast<ptrdiff_t>(oy) - static_cast<ptrdiff_t>(window_only ? row0 : 0);
        const auto x = static_cast<ptrdiff_t>(ox) - static_cast<ptrdiff_t>(window_only ? col0 : 0);
        return (y * static_cast<ptrdiff_t>(IW) + x) * static_cast<ptrdiff_t>(IC);
    }
};

// out (OH x OW x OC rows of n) = Epilogue(start + sum_k A(oc, k) patch_k), with A(oc, k) = a[oc * a_rs + a_off(k)].
// Always inlined, with its lambdas: a layer passes its shape as a constexpr ConvShape, and GCC then
// specialises the tiles for it (offsets and loop counts as constants).
// edges: whether tiles at the edges of the window [col0, col1) run each pixel's own taps (staircases,
// below) or every tile runs over the union of its pixels' taps (union_of_taps). Both are correct for an
// input that stores its zero columns; union_of_taps is for a caller whose window is the whole width, so
// that the edge tiles, which cost compile time, are not compiled. window_only: the staircases, and no
// tile that reads a zero column (split tiles as single pixels, the scalar samples in staircases too), for
// a window-only image (ConvShape). A template argument rather than the shape's flag: compiled into every
// call, the window-only tiles made GCC 12 inline less in calls that never run them (a "same"
// convolution's forward got slower).
enum class Edges { union_of_taps, staircases, window_only };

template <class Epilogue, Init init, Edges edges = Edges::staircases, class T, class AOff>
[[gnu::always_inline]] inline void conv_valid(const ConvShape& s, const T* a, ptrdiff_t a_rs, AOff a_off, const T* in,
                                              size_t n, T* out, std::type_identity_t<const T*> bias,
                                              std::type_identity_t<T*> z) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    constexpr int NP = tile_vectors;  // output pixels per tile
    const auto nn = static_cast<ptrdiff_t>(n);
    for (size_t oy = 0; oy < s.OH; ++oy) {
        // kernel rows that reach the non-zero input rows (only these input rows are ever read, which
        // pad_copy_sides relies on)
        const size_t ky0 = s.row0 > oy ? std::min(s.row0 - oy, s.KH) : 0;
        const size_t ky1 = std::min(s.KH, s.row1 > oy ? s.row1 - oy : 0);
        // Taps of pixel x that reach the non-zero columns: [first(x), end(x)).
        const auto first = [&](size_t x) { return s.col0 > x ? std::min(s.col0 - x, s.KW) : 0; };
        const auto end = [&](size_t x) { return std::min(s.KW, s.col1 > x ? s.col1 - x : 0); };
        // NR pixels from ox over the union of their taps, or (columns joining / leaving) each pixel over
        // its own taps, in NR stages: pixel j joins at tap first(ox + j) / leaves at end(ox + j).
        auto pixels = [&]<int NR, Columns columns = Columns::all>(size_t ox) __attribute__((always_inline)) {
            const ptrdiff_t in0 = s.origin(oy, ox) * nn;
            const ptrdiff_t out0 = static_cast<ptrdiff_t>((oy * s.OW + ox) * s.OC) * nn;
            const size_t kx0 = first(ox + NR - 1), kx1 = end(ox);
            const size_t length = kx1 > kx0 ? (kx1 - kx0) * s.IC : 0;
            KRange k{(ky0 * s.KW + kx0) * s.IC, ky1 > ky0 && length ? ky1 - ky0 : 0, length, s.KW * s.IC};
            // A tile that reaches every column runs its kernel rows as one segment (the table, not the
            // segments, steps from row to row): one loop of K, not KH loops of KW * IC, whose short
            // loops (five of five taps for LeNet5's first convolution) paid their set-up KH times.
            if constexpr (columns == Columns::all)
                if (k.length == k.stride && k.segments > 1) {
                    k.length *= k.segments;
                    k.segments = 1;
                }
            // offsets in a segment where stage st ends (0 <= stage_end[0] <= ... <= stage_end[NR - 1] = length):
            // joining, where pixel NR - 2 - st joins; leaving, where pixel NR - 1 - st leaves
            // (none for all columns: the tile reads no stage then, and gets a null pointer)
            size_t stage_end_of[NR];
            size_t* const stage_end = columns == Columns::all ? nullptr : stage_end_of;
            if constexpr (columns != Columns::all)
                for (int st = 0; st < NR; ++st) {
                    const size_t tap = st == NR - 1                   ? kx1
                                       : columns == Columns::joining ? first(ox + static_cast<size_t>(NR - 2 - st))
                                                                     : end(ox + static_cast<size_t>(NR - 1 - st));
                    const size_t e = tap > kx0 ? std::min((tap - kx0) * s.IC, length) : 0;
                    stage_end[st] = st ? std::max(e, stage_end[st - 1]) : e;
                }
            // On a window-only image in0 can be negative: it goes into the table's base, not into the
            // pointer (elsewhere into the pointer, as before window-only images)
            const ptrdiff_t base = s.window_only ? in0 : 0;
            const Tile<T, AOff, Table> t{k,    a,           a_rs, a_off, in + (in0 - base), Table{s.patch, nn, base},
                                         static_cast<ptrdiff_t>(s.IC) * nn,      out + out0,
                                         nn,   static_cast<ptrdiff_t>(s.OC) * nn, bias, z ? z + out0 : z};
            auto channel_tiles = [&]<int MR>(size_t m) __attribute__((always_inline)) {
                size_t v = 0;
                if constexpr (simd::enabled)
                    for (const size_t v_end = n - n % W; v < v_end; v += W)
                        nn_tile<Epilogue, init, V, MR, NR, columns>(moved<init>(t, m, static_cast<ptrdiff_t>(v)), stage_end);
                // the samples past the last full vector over the union of the taps (a staircase of
                // scalar tiles would add compile time for a few samples), but on a window-only image,
                // which holds no zeros to read, in the tile's own staircase
                for (; v < n; ++v)
                    if constexpr (edges == Edges::window_only)
                        nn_tile<Epilogue, init, T, MR, NR, columns>(moved<init>(t, m, static_cast<ptrdiff_t>(v)), stage_end);
                    else
                        nn_tile<Epilogue, init, T, MR, NR>(moved<init>(t, m, static_cast<ptrdiff_t>(v)));
            };
            // Output channels in blocks of 4 (then 2, 1), or of 6 when they divide the channels: with 16
            // vector registers 6 x 2 accumulators, 2 input vectors and a broadcast fill 15 registers, and a
            // 4 x 2 tile loads 6 operands per 8 FMAs where a 6 x 2 loads 8 per 12; with 32, 6 x 4 (29
            // registers) against 4 x 4 and 2 x 4 tiles for 6 channels, whose 8 accumulators are too few
            // for two 512-bit FMA pipes of latency 4 (docs/profile.md: a 6-row tile once measured slower
            // on Zen 4, whose pipes are 256 bits wide).
            if (s.OC % 6 == 0)
                for_row_blocks<6>(s.OC, channel_tiles);
            else
                for_row_blocks(s.OC, channel_tiles);
        };
        // A tile whose pixels reach different taps (at the edge of the zero padding, as in the input
        // gradient of a valid convolution) runs each pixel over its own taps when only their first taps
        // differ (left edge) or only their ends (right edge): over the union of the taps, LeNet5's second
        // convolution's input gradient would cost 1.3x the useful multiply-adds. A tile whose pixels
        // reach both the left and the right zero columns is split in two, each half over its union (on a
        // window-only image, into single pixels, each over its own taps).
        size_t ox = 0;
        for (const size_t ox_end = s.OW - s.OW % NP; ox < ox_end; ox += NP) {
            if constexpr (edges == Edges::union_of_taps) {
                pixels.template operator()<NP>(ox);
            } else {
                const bool same_first = first(ox) == first(ox + NP - 1), same_end = end(ox) == end(ox + NP - 1);
                if (same_first && same_end) {
                    pixels.template operator()<NP>(ox);
                } else if (same_end) {
                    pixels.template operator()<NP, Columns::joining>(ox);
                } else if (same_first) {
                    pixels.template operator()<NP, Columns::leaving>(ox);
                } else if constexpr (edges != Edges::window_only) {
                    pixels.template operator()<NP / 2>(ox);
                    pixels.template operator()<NP / 2>(ox + NP / 2);
                } else {
                    for (size_t j = 0; j < NP; ++j) pixels.template operator()<1>(ox + j);
                }
            }
        }
        for (; ox < s.OW; ++ox) pixels.template operator()<1>(ox);
    }
}

template <class Epilogue, Init init, class T, class AOff>
void conv_valid_reference(const ConvShape& s, const T* a, ptrdiff_t a_rs, AOff a_off, const T* in, size_t n,
                          T* out, const T* bias, T* z) {
    for (size_t oy = 0; oy < s.OH; ++oy)
        for (size_t ox = 0; ox < s.OW; ++ox)
            for (size_t oc = 0; oc < s.OC; ++oc)
                for (size_t j = 0; j < n; ++j) {
                    const size_t row = (oy * s.OW + ox) * s.OC + oc;
                    T acc = init == Init::row_bias ? bias[oc] : init == Init::accumulate ? out[row * n + j] : T(0);
                    for (size_t k = 0; k < s.K(); ++k) {
                        T x;
                        if (!s.window_only) {
                            x = in[((oy * s.IW + ox) * s.IC + s.patch[k]) * n + j];
                        } else {
                            // tap k = (ky, kx, c) of pixel (oy, ox) reads padded pixel (oy + ky, ox + kx)
                            const size_t ky = k / (s.KW * s.IC), kx = k / s.IC % s.KW, c = k % s.IC;
                            const size_t y = oy + ky, xx = ox + kx;
                            const bool inside = y >= s.row0 && y < s.row1 && xx >= s.col0 && xx < s.col1;
                            x = inside ? in[(((y - s.row0) * s.IW + xx - s.col0) * s.IC + c) * n + j] : T(0);
                        }
                        acc += a[static_cast<ptrdiff_t>(oc) * a_rs + a_off(k)] * x;
                    }
                    if (z) z[row * n + j] = acc;
                    out[row * n + j] = Epilogue::value(acc);
                }
}

// One sample's input gradient of a convolution, vectors along the output channels (conv_valid's run
// along the samples of a chunk: one lane for one sample):
//   dx[(y * W + x) * C + c] = sum_{ky, kx, oc} dzp[((y + ky) * DW + x + kx) * OC + oc]
//                                              * w[(((KH - 1 - ky) * KW + KW - 1 - kx) * C + c) * OC + oc]
// with dzp the output gradient zero-padded to DW columns and w the kernel as a Conv stores it (input-
// major, OC side by side per tap and input channel). Only dzp's rows [row0, row1) are read: the sum
// above is over the taps that reach them, the rows outside are taken as zero and need not be written
// (pad_copy_sides). A tile of NP pixels x CB channels keeps NP * CB vector sums (lane l: the channels
// with oc mod lanes = l) over the taps in order (ky, kx), then sums their lanes (hsum_store); the
// channels past the last whole vector add their products in the same tap order as scalars, and come
// last.
template <class T>
void conv_input_grad_one(size_t H, size_t W, size_t C, size_t OC, size_t KH, size_t KW, size_t DW, size_t row0,
                         size_t row1, const T* dzp, const T* w, T* dx) {
    using V = simd::vec<T>;
    constexpr size_t L = simd::width<T>;
    const size_t oc_vectors_end = OC - OC % L;
    for (size_t y = 0; y < H; ++y) {
        const size_t ky0 = row0 > y ? std::min(row0 - y, KH) : 0, ky1 = std::min(KH, row1 > y ? row1 - y : 0);
        auto tile = [&]<int NP, int CB>(size_t x0, size_t c0) __attribute__((always_inline)) {
            V acc[NP * CB];
            T tail[NP * CB];
#pragma GCC unroll 16
            for (int e = 0; e < NP * CB; ++e) {
                acc[e] = V(T(0));
                tail[e] = T(0);
            }
            for (size_t ky = ky0; ky < ky1; ++ky)
                for (size_t kx = 0; kx < KW; ++kx) {
                    const T* d = dzp + ((y + ky) * DW + x0 + kx) * OC;                     // pixel j: d + j * OC
                    const T* wk = w + (((KH - 1 - ky) * KW + KW - 1 - kx) * C + c0) * OC;  // channel i: wk + i * OC
                    for (size_t oc = 0; oc < oc_vectors_end; oc += L) {
                        V dv[NP];
#pragma GCC unroll 8
                        for (int j = 0; j < NP; ++j) dv[j] = loadv<V>(d + j * OC + oc);
#pragma GCC unroll 8
                        for (int i = 0; i < CB; ++i) {
                            const V wv = loadv<V>(wk + i * OC + oc);
#pragma GCC unroll 8
                            for (int j = 0; j < NP; ++j) acc[j * CB + i] = simd::fma(dv[j], wv, acc[j * CB + i]);
                        }
                    }
                    for (size_t oc = oc_vectors_end; oc < OC; ++oc)
                        for (int j = 0; j < NP; ++j)
                            for (int i = 0; i < CB; ++i) tail[j * CB + i] = simd::fma(d[j * OC + oc], wk[i * OC + oc], tail[j * CB + i]);
                }
            T sums[NP * CB];
            simd::hsum_store<T, NP * CB>(acc, sums);
            for (int j = 0; j < NP; ++j)
                for (int i = 0; i < CB; ++i) dx[(y * W + x0 + j) * C + c0 + i] = sums[j * CB + i] + tail[j * CB + i];
        };
        for_row_blocks(W, [&]<int NP>(size_t x0) {
            for_row_blocks<tile_vectors>(C, [&]<int CB>(size_t c0) { tile.template operator()<NP, CB>(x0, c0); });
        });
    }
}

template <class T>
void conv_input_grad_one_reference(size_t H, size_t W, size_t C, size_t OC, size_t KH, size_t KW, size_t DW,
                                   const T* dzp, const T* w, T* dx) {
    for (size_t y = 0; y < H; ++y)
        for (size_t x = 0; x < W; ++x)
            for (size_t c = 0; c < C; ++c) {
                T acc(0);
                for (size_t ky = 0; ky < KH; ++ky)
                    for (size_t kx = 0; kx < KW; ++kx)
                        for (size_t oc = 0; oc < OC; ++oc)
                            acc += dzp[((y + ky) * DW + x + kx) * OC + oc] *
                                   w[(((KH - 1 - ky) * KW + KW - 1 - kx) * C + c) * OC + oc];
                dx[(y * W + x) * C + c] = acc;
            }
}

// One sample's weight and bias gradients of a convolution with one input channel, vectors along the
// output pixels (along the output channels, fewer than a vector holds, most lanes would be idle:
// LeNet5's first convolution has 6 of 16). With one channel, output pixel q = oy * XW + ox, counted on
// the grid of the (padded) input's width XW, reads tap (ky, kx) at xp[q + ky * XW + kx]: a shift that is
// the same for every pixel. So, with dzw[oc * Q + q] = dz[(oy * OW + ox) * OC + oc] on that grid (zero in
// the XW - OW columns past each output row) and Q = (OH - 1) * XW + OW,
//   g[(ky * KW + kx) * OC + oc] += sum_{q < Q} xp[q + ky * XW + kx] dzw[oc * Q + q],
//   db[oc] += sum_{q < Q} dzw[oc * Q + q]
// are dot products along contiguous q: nt_tile's, with A's rows the kx of a kernel row (1 apart in xp)
// and B's the channels of dzw, db from the ones row of the first. dzw: OC * Q values of scratch. The
// zero columns add zero products, unless an input value they meet is infinite or NaN.
template <class T>
void conv_weight_grad_one_along_pixels(size_t OH, size_t OW, size_t XW, size_t OC, size_t KH, size_t KW,
                                       const T* xp, const T* dz, T* dzw, T* g, T* db) {
    const size_t Q = (OH - 1) * XW + OW;
    for (size_t oc = 0; oc < OC; ++oc)
        for (size_t oy = 0; oy < OH; ++oy) {
            T* row = dzw + oc * Q + oy * XW;
            for (size_t ox = 0; ox < OW; ++ox) row[ox] = dz[(oy * OW + ox) * OC + oc];
            if (oy + 1 < OH) std::fill(row + OW, row + XW, T(0));
        }
    // Tiles of MR taps of a kernel row (blocks of 5 or 3 where they divide KW, else of 4) x PR channels (3
    // with 32 vector registers, 2 with 16): MR * PR + PR accumulators (with the ones row), PR B vectors
    // and an A vector, at most 22 registers (15 with 16).
    constexpr int PR = simd::vector_registers >= 32 ? 3 : 2;
    auto kernel_row = [&]<int MRB>(size_t ky) {
        for_row_blocks<MRB>(KW, [&]<int MR>(size_t kx0) {
            for_row_blocks<PR>(OC, [&]<int P>(size_t oc0) {
                const detail::StoredRows<T> b{dzw + oc0 * Q, Q};
                T* c = g + (ky * KW + kx0) * OC + oc0;
                if (ky == 0 && kx0 == 0) nt_tile<MR, P, true>(Q, xp, 1, b, c, OC, db + oc0);
                else nt_tile<MR, P>(Q, xp + ky * XW + kx0, 1, b, c, OC);
            });
        });
    };
    for (size_t ky = 0; ky < KH; ++ky) {
        if (KW % 5 == 0) kernel_row.template operator()<5>(ky);
        else if (KW % 3 == 0) kernel_row.template operator()<3>(ky);
        else kernel_row.template operator()<4>(ky);
    }
}

template <class T>
void conv_weight_grad_one_along_pixels_reference(size_t OH, size_t OW, size_t XW, size_t OC, size_t KH, size_t KW,
                                                  const T* xp, const T* dz, T* g, T* db) {
    for (size_t ky = 0; ky < KH; ++ky)
        for (size_t kx = 0; kx < KW; ++kx)
            for (size_t oc = 0; oc < OC; ++oc) {
                T acc(0);
                for (size_t oy = 0; oy < OH; ++oy)
                    for (size_t ox = 0; ox < OW; ++ox) acc += xp[(oy + ky) * XW + ox + kx] * dz[(oy * OW + ox) * OC + oc];
                g[(ky * KW + kx) * OC + oc] += acc;
            }
    for (size_t oc = 0; oc < OC; ++oc) {
        T acc(0);
        for (size_t p = 0; p < OH * OW; ++p) acc += dz[p * OC + oc];
        db[oc] += acc;
    }
}

// Where conv_weight_grad reads dz: channel oc0's row of pixel p at dz + oc0 * channel + p * pixel, the
// tile's channels n apart. As the layers store it, channel = n and pixel = OC * n; in blocks of
// conv_dz_block channels over P pixels (conv_activation_parameter_grads), channel = P * n (a block is
// conv_dz_block * P * n long) and pixel = conv_dz_block * n.
inline constexpr size_t conv_dz_block = 4;
struct DzLayout {
    size_t channel, pixel;
    static DzLayout rows(size_t OC, size_t n) { return {n, OC * n}; }
    static DzLayout blocks(size_t P, size_t n) { return {P * n, conv_dz_block * n}; }
};

namespace detail {

// One MR x PR tile of conv_weight_grad over samples [j0, j1) in steps of NV * lanes<VV>: acc[i][j] += the
// products for rows k0 + i and channels oc0 + j, lane by lane. Per pixel and vector of samples it loads
// the MR input vectors, then one dz vector per channel, used at once: MR * PR + MR + 1 vector registers
// (where those do not fit, the PR dz vectors first, then one input vector at a time).
// NV vectors of samples per pixel: with NV = 2 each pixel's 64-byte rows are read whole in one visit (a
// chunk of 16 floats is two AVX2 vectors) instead of half a row in each of two sweeps over the image. N:
// the chunk's samples if known at compile time (0: run_time_n), so that the PR dz rows, N apart, are
// constant offsets from one pointer (as run-time offsets GCC 12 kept each in a general register and
// spilled). The MR input rows are offsets from one pointer too, so a pixel costs one pointer step for
// them, not MR. carried holds the MR x PR accumulators, row by row; they are copied into locals and
// back, so that they stay in registers. Always inlined: as a function of its own, taking carried from
// conv_weight_grad_tile, it kept carried in memory and was slower.
// backward: the pixels from the last to the first (for_weight_grad_tiles says why); each lane's sum then
// takes its terms in that order.
template <class VV, int MR, int PR, int NV, size_t N, class T>
[[gnu::always_inline]] inline void conv_weight_grad_sweep(const ConvShape& s, const T* in, const T* dz,
                                                          DzLayout layout, size_t run_time_n, size_t k0, size_t oc0,
                                                          size_t j0, size_t j1, VV* carried, bool backward = false) {
    constexpr size_t L = lanes<VV>;
    const size_t n = N ? N : run_time_n;
    VV acc[MR][PR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < PR; ++j) acc[i][j] = carried[i * PR + j];
    const size_t pixels = s.OH * s.OW;
    // steps from pixel to pixel, and from past a row's end to the next row (offsets, not pointers: going
    // backward, a pointer would pass before the start of the image)
    const ptrdiff_t sign = backward ? -1 : 1;
    const ptrdiff_t a_step = sign * static_cast<ptrdiff_t>(s.IC * n);
    const ptrdiff_t d_step = sign * static_cast<ptrdiff_t>(layout.pixel);
    const ptrdiff_t row_skip = sign * static_cast<ptrdiff_t>((s.IW - s.OW) * s.IC * n);
    const ptrdiff_t a_last = static_cast<ptrdiff_t>(((s.OH - 1) * s.IW + s.OW - 1) * s.IC * n);
    const ptrdiff_t d_last = static_cast<ptrdiff_t>((pixels - 1) * layout.pixel);
    size_t a_off[MR];  // row k0 + i of a patch, from row k0
    for (int i = 0; i < MR; ++i) a_off[i] = (s.patch[k0 + i] - s.patch[k0]) * n;
    // samples outermost; then one loop over all pixels, whose body is straight-line code (with a loop
    // per row of pixels GCC 12 stored and reloaded every accumulator at the end of each row)
    for (size_t v = j0; v < j1; v += NV * L) {
        ptrdiff_t a = static_cast<ptrdiff_t>(s.patch[k0] * n + v) + (backward ? a_last : 0);
        ptrdiff_t d = static_cast<ptrdiff_t>(oc0 * layout.channel + v) + (backward ? d_last : 0);
        for (size_t p = 0, ox = 0; p < pixels; ++p) {
            const T* arow = in + a;
            const T* drow = dz + d;
            for (int u = 0; u < NV; ++u) {
                if constexpr (MR * PR + MR + 1 <= simd::vector_registers) {
                    VV av[MR];
                    for (int i = 0; i < MR; ++i) av[i] = pinned(loadv<VV>(arow + a_off[i] + u * L));
                    for (int j = 0; j < PR; ++j) {
                        const VV b = pinned(loadv<VV>(drow + j * n + u * L));
                        for (int i = 0; i < MR; ++i) acc[i][j] = simd::fma(av[i], b, acc[i][j]);
                    }
                } else {
                    // A tall tile (6 x 2 with 16 registers): the PR dz vectors first, then each input vector
                    // for its PR FMAs, MR * PR + PR + 1 registers.
                    VV bv[PR];
                    for (int j = 0; j < PR; ++j) bv[j] = pinned(loadv<VV>(drow + j * n + u * L));
                    for (int i = 0; i < MR; ++i) {
                        const VV a = pinned(loadv<VV>(arow + a_off[i] + u * L));
                        for (int j = 0; j < PR; ++j) acc[i][j] = simd::fma(a, bv[j], acc[i][j]);
                    }
                }
            }
            a += a_step;
            d += d_step;
            if (++ox == s.OW) {
                ox = 0;
                a += row_skip;
            }
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < PR; ++j) carried[i * PR + j] = acc[i][j];
}

// out[i][j] += the sum of the lanes of acc[i * PR + j].
template <class VV, int MR, int PR, class T>
void conv_weight_grad_add_sums(const VV* acc, T (&out)[MR][PR]) {
    if constexpr (simd::is_vector<VV>) {
        constexpr size_t count = MR * PR, group = simd::hsum_group<T>;
        if constexpr (count > group && count % group != 0) {
            // Padded with zero vectors to whole groups, so that every sum takes the grouped reduction: a
            // 2 x 6 tile then gives the bits of the 4 x 2 tiles it replaced (12 vectors alone would be
            // reduced as 8 grouped and 4 on their own).
            constexpr size_t padded = (count + group - 1) / group * group;
            VV v[padded];
            T sums[padded] = {};
            for (size_t i = 0; i < padded; ++i) v[i] = i < count ? acc[i] : VV(T(0));
            simd::hsum_add<T, padded>(v, sums);
            for (size_t i = 0; i < count; ++i) (&out[0][0])[i] += sums[i];
        } else {
            simd::hsum_add<T, count>(acc, &out[0][0]);
        }
    } else {
        for (int i = 0; i < MR; ++i)
            for (int j = 0; j < PR; ++j) out[i][j] += acc[i * PR + j];
    }
}

// One MR x PR tile: out[i][j] += the sums for rows k0 + i and channels oc0 + j.
template <class VV, int MR, int PR, int NV, size_t N, class T>
void conv_weight_grad_tile(const ConvShape& s, const T* in, const T* dz, DzLayout layout, size_t run_time_n,
                           size_t k0, size_t oc0, size_t j0, size_t j1, T (&out)[MR][PR], bool backward) {
    VV acc[MR * PR];
    for (int i = 0; i < MR * PR; ++i) acc[i] = VV(T(0));
    conv_weight_grad_sweep<VV, MR, PR, NV, N>(s, in, dz, layout, run_time_n, k0, oc0, j0, j1, acc, backward);
    conv_weight_grad_add_sums<VV, MR, PR>(acc, out);
}

}  // namespace detail

namespace detail {
// Calls tile.template operator()<MR, PR>(k0, oc0, backward) for the register tiles of conv_weight_grad in
// T, in a fixed order that covers every (k, oc) of the shape once. With 32 vector registers (AVX-512)
// and float, the tiles are 6 x 4 when OC is a multiple of 4 and 4 x 6 for a multiple of 6 (LeNet5's
// convolutions: 16 and 6 channels); with 16 (AVX2) and float, 2 x 6 for a multiple of 6; else 4 x 4 (6 x
// 2 with 16 registers) and smaller. channels_outer: the same tiles, all rows of a block of channels
// before the next block (for dz in blocks of channels, whose block is then read from L1 by every row's
// tile).
//
// backward: whether the tile sweeps its pixels from the last to the first, for every other tile in
// either order (the parity of its row block plus its channel block), so that a tile starts where the one
// before it ended. Each tile reads its rows of the image over all output pixels, shifted by its tap: where
// the image and a block of dz do not fit L1 together, a sweep in the order of the last one starts on rows
// the last one read first and has evicted since, and reads every row from L2; a sweep in the other order
// starts on the rows still in L1 (LeNet5's second convolution: a 12 x 12 x 6 image, 54 KB in a chunk of
// 16 floats, and a 16 KB block of dz against a 32 KB L1; docs/profile.md). The direction is a function
// of (k0, oc0), not of the order, so both orders give the same bits.
template <class T, bool channels_outer = false, class Tile>
[[gnu::always_inline]] inline void for_weight_grad_tiles(const ConvShape& s, Tile&& tile) {
    const auto backward = [](size_t row_block, size_t channel_block) { return (row_block + channel_block) % 2 == 1; };
    // Rows k in blocks of MR (then 2, 1), each across the channels in blocks of exactly PR.
    auto wide = [&]<int MR, int PR>() {
        if constexpr (channels_outer) {
            for (size_t oc0 = 0; oc0 < s.OC; oc0 += PR)
                for_row_blocks<MR>(s.K(), [&]<int R>(size_t k0) {
                    tile.template operator()<R, PR>(k0, oc0, backward(k0 / MR, oc0 / PR));
                });
        } else {
            for_row_blocks<MR>(s.K(), [&]<int R>(size_t k0) {
                for (size_t oc0 = 0; oc0 < s.OC; oc0 += PR)
                    tile.template operator()<R, PR>(k0, oc0, backward(k0 / MR, oc0 / PR));
            });
        }
    };
    // Double keeps 4 x 4: the wide tiles measured slower in double on LeNet5's second convolution.
    constexpr bool wide_tiles = simd::vector_registers >= 32 && std::is_same_v<T, float>;
    // With 16 registers a 4 x 2 tile's 8 accumulators, each taking two FMAs per pixel (two vectors of
    // samples), only just cover the FMA latency on two pipes, and it loads 6 operands per 8 FMAs; a 2 x 6
    // tile has 12 accumulators, 2 input vectors and a dz vector (15 registers) and loads 8 per 12, with
    // the same bits (3 x 4 for 16 channels, and 6 x 2, 5 x 2, 4 x 3, 3 x 3 for 6, measured slower).
    constexpr bool six_channel_tiles = simd::vector_registers < 32 && std::is_same_v<T, float>;
    // 6 x 4 rather than 3 x 8 for a multiple of 4 channels: both have 24 accumulators, but 6 x 4 loads 10
    // operands per 24 FMAs, not 11, and each dz row of a pixel serves 6 rows of k, not 3, where the image
    // does not fit L1 and its rows come from L2 (measured on an Intel Xeon with two 512-bit FMA pipes,
    // where 4 x 4, 5 x 4 and 7 x 4 came between and 2 x 8, 2 x 16 and 1 x 16 were slower).
    if (wide_tiles && s.OC % 4 == 0) {
        wide.template operator()<6, 4>();
    } else if (wide_tiles && s.OC % 6 == 0) {
        wide.template operator()<4, 6>();
    } else if (six_channel_tiles && s.OC % 6 == 0) {
        wide.template operator()<2, 6>();
    } else {
        // 4 x 4; with 16 vector registers 6 x 2, its dz vectors loaded first (12 accumulators, 2 dz
        // vectors and an input vector: 8 loads per 12 FMAs). The 4 x 2 tile it replaced had 8 accumulators
        // (two FMAs each per pixel: just the FMA latency on two pipes) and loaded 6 per 8 (5 x 2 was
        // slower, and 7 x 2 spilled).
        constexpr int row_block = simd::vector_registers < 32 ? 6 : 4;
        if constexpr (channels_outer) {
            for_row_blocks<tile_vectors>(s.OC, [&]<int PR>(size_t oc0) {
                for_row_blocks<row_block>(s.K(), [&]<int MR>(size_t k0) {
                    tile.template operator()<MR, PR>(k0, oc0, backward(k0 / row_block, oc0 / tile_vectors));
                });
            });
        } else {
            for_row_blocks<row_block>(s.K(), [&]<int MR>(size_t k0) {
                for_row_blocks<tile_vectors>(s.OC, [&]<int PR>(size_t oc0) {
                    tile.template operator()<MR, PR>(k0, oc0, backward(k0 / row_block, oc0 / tile_vectors));
                });
            });
        }
    }
}
}  // namespace detail

// Carried weight-gradient sums (vectors on the stack), K * OC at most: conv_weight_grad's one-channel
// route and conv_activation_parameter_grads' bands.
inline constexpr size_t conv_band_state = 256;

// The weight gradient of a convolution of one input channel (a first layer on gray images: LeNet5's
// first), vectors along the samples as in conv_weight_grad, in tiles that slide along the output pixels
// of a row. A tile is one kernel row ky and CG output channels, KW x CG accumulators; it takes P pixels at
// a time: their dz vectors stay in registers, and input column ox + col, loaded once, meets pixel ox + i
// at kernel column col - i. Per P pixels it loads P CG dz vectors and P + KW - 1 input vectors for P KW
// CG FMAs (5 x 3 tiles of 4 pixels in float: 20 loads per 60 FMAs), where conv_weight_grad's 4 x 6 tiles
// of the same shape load 10 per 24 and its 1 x 6 tile 7 per 6. Each lane of a sum takes its pixels in
// order, and within a pixel its NV vectors of samples in order, as conv_weight_grad's forward sweeps do;
// conv_weight_grad_add_carried reduces the sums tile by tile as those tiles do, so the bits are theirs.
// The image, one channel, is read once per kernel row and channel group, and each input vector serves
// KW FMAs per channel: fewer loads per FMA than the tiles above (docs/profile.md).
namespace detail {
inline constexpr size_t one_channel_max_kw = 5;
// Pixels per tile step: the tile's dz vectors, its accumulators and an input vector per vector of samples
// fit 32 registers for KW <= 5 and CG <= 3 (28 in float, 29 in double with two vectors of samples).
template <int NV>
inline constexpr int one_channel_pixels = NV == 1 ? 4 : 2;

// Whether conv_weight_grad_one_channel takes s and n: one input channel, the patch of a dense kernel
// (patch[ky * KW + kx] = ky * IW + kx), at most one_channel_max_kw columns, one or two vectors of samples,
// 32 vector registers.
template <class T>
bool conv_weight_grad_one_channel_fits(const ConvShape& s, size_t n) {
    constexpr size_t W = simd::width<T>;
    if (!(simd::enabled && simd::vector_registers >= 32 && s.IC == 1 && s.KW <= one_channel_max_kw &&
          (n == W || n == 2 * W)))
        return false;
    for (size_t k = 0; k < s.K(); ++k)
        if (s.patch[k] != k / s.KW * s.IW + k % s.KW) return false;
    return true;
}

// carried[(ky * KW + kx) * OC + c0 + c] += the products of kernel row ky, channels [c0, c0 + CG), over all
// of s's output pixels, lane by lane.
template <class T, int KW, int CG, int NV>
[[gnu::always_inline]] inline void conv_weight_grad_one_channel_tile(const ConvShape& s, const T* in, const T* dz,
                                                                     size_t ky, size_t c0, simd::vec<T>* carried) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>, n = NV * W;
    constexpr int P = one_channel_pixels<NV>;
    static_assert(KW * CG + P * CG * NV + NV <= 32, "the sliding tile does not fit 32 vector registers");
    const size_t OC = s.OC;
    V acc[KW][CG];
    for (int kx = 0; kx < KW; ++kx)
        for (int c = 0; c < CG; ++c) acc[kx][c] = carried[(ky * KW + size_t(kx)) * OC + c0 + size_t(c)];
    // Q pixels from ox: input column ox + col at x + col * n, pixel ox + i's channel c0 + c at d + (i OC + c) n
    auto pixels = [&]<int Q>(const T* x, const T* d) __attribute__((always_inline)) {
        V dv[Q][CG][NV];
#pragma GCC unroll 16
        for (int i = 0; i < Q; ++i)
#pragma GCC unroll 16
            for (int c = 0; c < CG; ++c)
#pragma GCC unroll 16
                for (int u = 0; u < NV; ++u) dv[i][c][u] = pinned(loadv<V>(d + (size_t(i) * OC + size_t(c)) * n + u * W));
#pragma GCC unroll 16
        for (int col = 0; col < Q + KW - 1; ++col) {
            V xv[NV];
#pragma GCC unroll 16
            for (int u = 0; u < NV; ++u) xv[u] = pinned(loadv<V>(x + size_t(col) * n + u * W));
#pragma GCC unroll 16
            for (int i = 0; i < Q; ++i) {
                const int kx = col - i;
                if (kx < 0 || kx >= KW) continue;
#pragma GCC unroll 16
                for (int c = 0; c < CG; ++c)
#pragma GCC unroll 16
                    for (int u = 0; u < NV; ++u) acc[kx][c] = simd::fma(xv[u], dv[i][c][u], acc[kx][c]);
            }
        }
    };
    for (size_t oy = 0; oy < s.OH; ++oy) {
        const T* x = in + (oy + ky) * s.IW * n;
        const T* d = dz + (oy * s.OW * OC + c0) * n;
        size_t ox = 0;
        for (; ox + P <= s.OW; ox += P) pixels.template operator()<P>(x + ox * n, d + ox * OC * n);
        for (; ox < s.OW; ++ox) pixels.template operator()<1>(x + ox * n, d + ox * OC * n);
    }
    for (int kx = 0; kx < KW; ++kx)
        for (int c = 0; c < CG; ++c) carried[(ky * KW + size_t(kx)) * OC + c0 + size_t(c)] = acc[kx][c];
}

// carried[k * OC + oc] += the products of weight (k, oc) over s's output pixels, lane by lane, dz in the
// layers' layout. Needs conv_weight_grad_one_channel_fits<T>(s, n).
template <class T>
void conv_weight_grad_one_channel(const ConvShape& s, const T* in, const T* dz, size_t n, simd::vec<T>* carried) {
    auto tiles = [&]<int KW, int NV>() {
        for (size_t ky = 0; ky < s.KH; ++ky)
            for_row_blocks<3>(s.OC, [&]<int CG>(size_t c0) {
                conv_weight_grad_one_channel_tile<T, KW, CG, NV>(s, in, dz, ky, c0, carried);
            });
    };
    auto with_kw = [&]<int NV>() {
        switch (s.KW) {
            case 1: return tiles.template operator()<1, NV>();
            case 2: return tiles.template operator()<2, NV>();
            case 3: return tiles.template operator()<3, NV>();
            case 4: return tiles.template operator()<4, NV>();
            default: return tiles.template operator()<5, NV>();
        }
    };
    if (n == simd::width<T>) with_kw.template operator()<1>();
    else with_kw.template operator()<2>();
}

// Where carried weight-gradient sums are: weight (k, oc)'s at [k * OC + oc] (conv_weight_grad_one_channel),
// or tile after tile in the order of for_weight_grad_tiles, MR x PR each (conv_weight_grad_sweep's).
enum class CarriedLayout { by_weight, by_tile };

// g[k * OC + oc] += the sum of the lanes of weight (k, oc)'s vector in carried, reduced in the groups of
// conv_weight_grad's tiles (for_weight_grad_tiles), so with the bits of their horizontal sums.
template <class T>
void conv_weight_grad_add_carried(const ConvShape& s, const simd::vec<T>* carried, CarriedLayout layout, T* g) {
    using V = simd::vec<T>;
    const V* next_tile = carried;
    for_weight_grad_tiles<T>(s, [&]<int MR, int PR>(size_t k0, size_t oc0, bool) {
        V acc[MR * PR];
        for (int i = 0; i < MR; ++i)
            for (int j = 0; j < PR; ++j)
                acc[i * PR + j] = layout == CarriedLayout::by_tile ? next_tile[i * PR + j]
                                                                   : carried[(k0 + size_t(i)) * s.OC + oc0 + size_t(j)];
        next_tile += MR * PR;
        T out[MR][PR] = {};
        conv_weight_grad_add_sums<V, MR, PR>(acc, out);
        for (int i = 0; i < MR; ++i)
            for (int j = 0; j < PR; ++j) g[(k0 + size_t(i)) * s.OC + oc0 + size_t(j)] += out[i][j];
    });
}
}  // namespace detail

// The order of the pixels in each tile of conv_weight_grad: every other tile backward
// (for_weight_grad_tiles says why), or all forward, as conv_activation_parameter_grads' bands take them.
enum class Sweeps { alternating, forward };

// g[k * OC + oc] += sum_{pixels p, samples j} in[(top_left(p) + patch[k]) * n + j] * dz[(p * OC + oc) * n + j]
// An MR x PR tile of (k, oc) (detail::for_weight_grad_tiles) keeps its accumulators in registers through
// all pixels and samples and sums them horizontally once; the samples past the last full vector go
// through the same loop as scalars. dz may be laid out otherwise (DzLayout): the sums are the same, and
// so with channels_outer (for_weight_grad_tiles), which only orders the tiles.
// One input channel (detail::conv_weight_grad_one_channel_fits), dz in the layers' layout and at most
// conv_band_state sums: the sliding tiles of detail::conv_weight_grad_one_channel, which give the bits of
// the forward sweeps whichever `sweeps` asks for (their image, one channel, is read once per kernel row
// and channel group, so a backward sweep has nothing to win).
template <bool channels_outer = false, Sweeps sweeps = Sweeps::alternating, class T>
void conv_weight_grad(const ConvShape& s, const T* in, const T* dz, DzLayout layout, size_t n, T* g) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    if (layout.channel == n && layout.pixel == s.OC * n && s.K() * s.OC <= conv_band_state &&
        detail::conv_weight_grad_one_channel_fits<T>(s, n)) {
        V carried[conv_band_state];
        std::fill_n(carried, s.K() * s.OC, V(T(0)));
        detail::conv_weight_grad_one_channel(s, in, dz, n, carried);
        detail::conv_weight_grad_add_carried(s, static_cast<const V*>(carried), detail::CarriedLayout::by_weight, g);
        return;
    }
    const size_t nv = simd::enabled ? n - n % W : 0, nv2 = nv - nv % (2 * W);
    detail::for_weight_grad_tiles<T, channels_outer>(s, [&]<int MR, int PR>(size_t k0, size_t oc0, bool backward) {
        T out[MR][PR] = {};
        const bool b = sweeps == Sweeps::alternating && backward;
        if (simd::enabled && n == W) {
            detail::conv_weight_grad_tile<V, MR, PR, 1, W>(s, in, dz, layout, n, k0, oc0, 0, n, out, b);
        } else if (simd::enabled && n == 2 * W) {
            detail::conv_weight_grad_tile<V, MR, PR, 2, 2 * W>(s, in, dz, layout, n, k0, oc0, 0, n, out, b);
        } else {
            // pairs of vectors, then a last vector, then the samples past the last full vector
            if (nv2 > 0) detail::conv_weight_grad_tile<V, MR, PR, 2, 0>(s, in, dz, layout, n, k0, oc0, 0, nv2, out, b);
            if (nv2 < nv) detail::conv_weight_grad_tile<V, MR, PR, 1, 0>(s, in, dz, layout, n, k0, oc0, nv2, nv, out, b);
            if (nv < n) detail::conv_weight_grad_tile<T, MR, PR, 1, 0>(s, in, dz, layout, n, k0, oc0, nv, n, out, b);
        }
        for (int i = 0; i < MR; ++i)
            for (int j = 0; j < PR; ++j) g[(k0 + i) * s.OC + oc0 + j] += out[i][j];
    });
}
template <Sweeps sweeps = Sweeps::alternating, class T>
void conv_weight_grad(const ConvShape& s, const T* in, const T* dz, size_t n, T* g) {
    conv_weight_grad<false, sweeps>(s, in, dz, DzLayout::rows(s.OC, n), n, g);
}

template <class T>
void conv_weight_grad_reference(const ConvShape& s, const T* in, const T* dz, size_t n, T* g) {
    for (size_t k = 0; k < s.K(); ++k)
        for (size_t oc = 0; oc < s.OC; ++oc) {
            T acc = 0;
            for (size_t oy = 0; oy < s.OH; ++oy)
                for (size_t ox = 0; ox < s.OW; ++ox)
                    for (size_t j = 0; j < n; ++j)
                        acc += in[((oy * s.IW + ox) * s.IC + s.patch[k]) * n + j] *
                               dz[((oy * s.OW + ox) * s.OC + oc) * n + j];
            g[k * s.OC + oc] += acc;
        }
}

// The weight gradient with its vectors along the output channels, for OC of one or two vectors (32
// vector registers, kernels of at most 5 columns): the sums of conv_weight_grad, each kept as the lanes
// of a vector of output channels (which g stores side by side), so that no sum is reduced across lanes
// and every product is one FMA of a broadcast input value (a memory operand) and a vector of dz. dz must
// first be transposed to dzt[(p * n + j) * OC + oc] (transpose_channels_samples). A tile is one kernel
// row ky and CG input channels, KW x CG x NV accumulators, and it takes the output pixels of a row two
// at a time: input value (ox + col, c) meets pixel ox + i's dz at kernel column kx = col - i, so per
// sample it loads 2 NV dz vectors and (KW + 1) CG input values for 2 KW CG NV FMAs (LeNet5's second
// convolution in float: 20 loads per 30 FMAs, against 31 per 30 one pixel at a time and 10 vector loads
// per 24 FMAs plus the horizontal sums in conv_weight_grad's tiles; docs/profile.md).
namespace detail {
// What conv_weight_grad_along_channels dispatches to: kernel widths 1 to 5, one or two vectors of channels
// (whose tiles of one input channel all fit 32 registers, along_channels_tile_fits).
inline constexpr size_t along_channels_max_kw = 5, along_channels_max_vectors = 2;
}  // namespace detail

template <class T>
constexpr bool conv_weight_grad_along_channels_fits(size_t OC, size_t KW) {
    constexpr size_t W = simd::width<T>;
    return simd::enabled && simd::vector_registers >= 32 && OC % W == 0 && OC / W <= detail::along_channels_max_vectors &&
           KW <= detail::along_channels_max_kw;
}
template <class T>
constexpr bool conv_weight_grad_along_channels_fits(const ConvShape& s) {
    return conv_weight_grad_along_channels_fits<T>(s.OC, s.KW);
}

// dzt[(p * n + j) * C + c] = dz[(p * C + c) * n + j]: each pixel's C x n block transposed (16 x 16 float
// blocks in registers with AVX-512, detail::transpose_strip).
template <class T>
void transpose_channels_samples(size_t P, size_t C, size_t n, const T* dz, T* dzt) {
#if !defined(CHAINLET_SCALAR) && defined(__AVX512F__)
    constexpr size_t B = detail::transpose_block;
    if constexpr (std::is_same_v<T, float>)
        if (C % B == 0 && n % B == 0) {
            for (size_t p = 0; p < P; ++p)
                for (size_t c0 = 0; c0 < C; c0 += B) {
                    const float* rows[B];
                    for (size_t i = 0; i < B; ++i) rows[i] = dz + (p * C + c0 + i) * n;
                    detail::transpose_strip(rows, n, dzt + p * n * C + c0, C);
                }
            return;
        }
#endif
    for (size_t p = 0; p < P; ++p) scatter_transpose(dz + p * C * n, C, n, dzt + p * n * C);
}

// Output rows per band of conv_weight_grad_along_channels: all tiles run over one row of output pixels,
// then all over the next, so that the row's dz (8 KB in LeNet5's second convolution, a chunk of 16
// floats) and the input rows under it stay in L1 for every tile; each tile loads its accumulators from g
// and stores them back per row (30 loads and stores per 1,920 FMAs there). Bands of 2 or 4 rows, or one
// pass over all rows, measured slower than rows of 1.
inline constexpr size_t along_channels_band_rows = 1;

namespace detail {
// The register budget of one tile of conv_weight_grad_along_channels: KW x CG x NV accumulators, the
// 2 NV dz vectors of a pixel pair and a broadcast input value.
constexpr bool along_channels_tile_fits(size_t KW, size_t CG, size_t NV) {
    return KW * CG * NV + 2 * NV + 1 <= static_cast<size_t>(simd::vector_registers);
}

// The input channels per tile of conv_weight_grad_along_channels: the most, up to 3 and dividing IC,
// whose tile fits the registers (along_channels_tile_fits).
constexpr size_t along_channels_group(size_t KW, size_t IC, size_t NV) {
    size_t best = 1;
    for (size_t cg = 2; cg <= 3; ++cg)
        if (IC % cg == 0 && along_channels_tile_fits(KW, cg, NV)) best = cg;
    return best;
}

// One tile of conv_weight_grad_along_channels: kernel row ky, input channels [c0, c0 + CG), all output
// pixels; g's rows of those taps += the sums. N: the chunk's samples if known at compile time (0: n).
template <class T, int KW, int CG, int NV, size_t N>
[[gnu::always_inline]] inline void conv_weight_grad_along_channels_tile(const ConvShape& s, const T* in, const T* dzt,
                                                                        size_t run_time_n, size_t ky, size_t c0,
                                                                        size_t oy0, size_t oy1, T* g) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    const size_t n = N ? N : run_time_n, IC = s.IC, OC = s.OC;
    V acc[KW][CG][NV];
    auto g_row = [&](int kx, int c) { return g + ((ky * s.KW + size_t(kx)) * IC + c0 + size_t(c)) * OC; };
#pragma GCC unroll 16
    for (int kx = 0; kx < KW; ++kx)
#pragma GCC unroll 16
        for (int c = 0; c < CG; ++c)
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) acc[kx][c][v] = loadv<V>(g_row(kx, c) + v * W);
    // Q output pixels from ox, sample j: input column ox + col, channel c0 + c at a[(col * IC + c) * n]
    auto pixels = [&]<int Q>(const T* a, const T* d) __attribute__((always_inline)) {
        for (size_t j = 0; j < n; ++j) {
            V dv[Q][NV];
#pragma GCC unroll 16
            for (int i = 0; i < Q; ++i)
#pragma GCC unroll 16
                for (int v = 0; v < NV; ++v) dv[i][v] = loadv<V>(d + (i * n + j) * OC + v * W);
#pragma GCC unroll 16
            for (int col = 0; col < Q + KW - 1; ++col)
#pragma GCC unroll 16
                for (int c = 0; c < CG; ++c) {
                    const V b(a[(col * IC + c) * n + j]);
#pragma GCC unroll 16
                    for (int i = 0; i < Q; ++i) {
                        const int kx = col - i;
                        if (kx >= 0 && kx < KW) {
#pragma GCC unroll 16
                            for (int v = 0; v < NV; ++v) acc[kx][c][v] = simd::fma(b, dv[i][v], acc[kx][c][v]);
                        }
                    }
                }
        }
    };
    for (size_t oy = oy0; oy < oy1; ++oy) {
        const T* a = in + (((oy + ky) * s.IW) * IC + c0) * n;
        const T* d = dzt + oy * s.OW * n * OC;
        size_t ox = 0;
        for (; ox + 2 <= s.OW; ox += 2) pixels.template operator()<2>(a + ox * IC * n, d + ox * n * OC);
        if (ox < s.OW) pixels.template operator()<1>(a + ox * IC * n, d + ox * n * OC);
    }
#pragma GCC unroll 16
    for (int kx = 0; kx < KW; ++kx)
#pragma GCC unroll 16
        for (int c = 0; c < CG; ++c)
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) storev(g_row(kx, c) + v * W, acc[kx][c][v]);
}
}  // namespace detail

// g[k * OC + oc] += sum_{pixels p, samples j} in[(top_left(p) + patch[k]) * n + j] * dzt[(p * n + j) * OC + oc],
// patch[(ky * KW + kx) * IC + c] = (ky * IW + kx) * IC + c. Needs conv_weight_grad_along_channels_fits<T>(s).
// Each sum takes its terms output row by output row (added to g after each row), pixel pair by pixel pair,
// sample by sample. Always inlined: with a layer's constexpr shape only its own tile is compiled.
template <class T>
[[gnu::always_inline]] inline void conv_weight_grad_along_channels(const ConvShape& s, const T* in, const T* dzt,
                                                                   size_t n, T* g) {
    constexpr size_t W = simd::width<T>;
    const size_t NV = s.OC / W, CG = detail::along_channels_group(s.KW, s.IC, NV);
    auto rows = [&]<int KW, int CG_, int NV_, size_t N>() __attribute__((always_inline)) {
        for (size_t oy0 = 0; oy0 < s.OH; oy0 += along_channels_band_rows) {
            const size_t oy1 = std::min(s.OH, oy0 + along_channels_band_rows);
            for (size_t ky = 0; ky < s.KH; ++ky)
                for (size_t c0 = 0; c0 < s.IC; c0 += CG_)
                    detail::conv_weight_grad_along_channels_tile<T, KW, CG_, NV_, N>(s, in, dzt, n, ky, c0, oy0, oy1, g);
        }
    };
    auto with_n = [&]<int KW, int CG_, int NV_>() __attribute__((always_inline)) {
        if (n == W) rows.template operator()<KW, CG_, NV_, W>();
        else rows.template operator()<KW, CG_, NV_, 0>();
    };
    // (along_channels_group picks no group whose accumulators do not fit, so the last branch is never empty)
    auto with_nv = [&]<int KW, int CG_>() __attribute__((always_inline)) {
        if (NV == 1) with_n.template operator()<KW, CG_, 1>();
        else if constexpr (detail::along_channels_tile_fits(KW, CG_, 2)) with_n.template operator()<KW, CG_, 2>();
    };
    auto with_cg = [&]<int KW>() __attribute__((always_inline)) {
        if (CG == 1) with_nv.template operator()<KW, 1>();
        else if (CG == 2) with_nv.template operator()<KW, 2>();
        else with_nv.template operator()<KW, 3>();
    };
    if constexpr (simd::vector_registers >= 32) {
        if (s.KW == 1) with_cg.template operator()<1>();
        else if (s.KW == 2) with_cg.template operator()<2>();
        else if (s.KW == 3) with_cg.template operator()<3>();
        else if (s.KW == 4) with_cg.template operator()<4>();
        else with_cg.template operator()<5>();
    }
}

namespace detail {
// activation_pullback_channel_sums over P pixels with its sums carried: channel c's vector and scalar
// sums start from acc[c] and tail[c] and are left there (db untouched), so that consecutive calls on
// consecutive pixels sum in the order of one call; with acc null they start from zero and go to db.
// blocks, if not null: dz also written there, each block of CB channels from c0 as [pixel][CB][n] at
// blocks + c0 * P * n (for_row_blocks' CB: 4 for C a multiple of 4, the layout DzLayout::blocks).
template <class Act, class T>
void activation_pullback_channel_sums_carried(size_t P, size_t C, T* dy, const T* s, size_t n, T* db,
                                              simd::vec<T>* carried_acc, T* carried_tail, T* blocks = nullptr) {
    // The loop of vector_loop.hpp's vectors_then_scalars, written out: through that template (its body
    // always inlined) it ran slower, with the same bits.
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    const size_t nv = simd::enabled ? n - n % W : 0;
    for_row_blocks(C, [&]<int CB>(size_t c0) {
        V acc[CB];  // the sums of the full vectors, lane by lane
        T tail[CB];  // and of each row's last n % W values
        for (int i = 0; i < CB; ++i) {
            acc[i] = carried_acc ? carried_acc[c0 + i] : V(T(0));
            tail[i] = carried_acc ? carried_tail[c0 + i] : T(0);
        }
        // NVC: n as a compile-time count of whole vectors (1 or 2: a chunk of 16 floats is one), so that no
        // loop or tail test runs per row; 0: any n, its last n % W values as scalars. Pointers stepped per
        // pixel and the vector sums in local registers (with per-row index products GCC 12 kept them on the
        // stack); the same operations in the same order for every NVC, so the same bits.
        auto rows = [&]<size_t NVC, bool to_blocks>() {
            const size_t row_n = NVC ? NVC * W : n, vectors = NVC ? NVC * W : nv;
            V sum[CB];
            for (int i = 0; i < CB; ++i) sum[i] = acc[i];
            T* d = dy + c0 * row_n;
            const T* si = s + c0 * row_n;
            T* b = to_blocks ? blocks + c0 * P * row_n : nullptr;
            for (size_t p = 0; p < P; ++p, d += C * row_n, si += C * row_n) {
#pragma GCC unroll 4
                for (int i = 0; i < CB; ++i) {
                    T* di = d + i * row_n;
                    const T* sii = si + i * row_n;
                    T* bi = to_blocks ? b + i * row_n : nullptr;
                    size_t v = 0;
                    if constexpr (simd::enabled)
#pragma GCC unroll 2
                        for (; v < vectors; v += W) {
                            const V z = Act::pullback(loadv<V>(di + v), loadv<V>(sii + v));
                            storev(di + v, z);
                            if constexpr (to_blocks) storev(bi + v, z);
                            sum[i] += z;
                        }
                    if constexpr (NVC == 0)
                        for (; v < row_n; ++v) {
                            di[v] = Act::pullback(di[v], sii[v]);
                            if constexpr (to_blocks) bi[v] = di[v];
                            tail[i] += di[v];
                        }
                }
                if constexpr (to_blocks) b += CB * row_n;
            }
            for (int i = 0; i < CB; ++i) acc[i] = sum[i];
        };
        auto with_blocks = [&]<size_t NVC>() {
            if (blocks) rows.template operator()<NVC, true>();
            else rows.template operator()<NVC, false>();
        };
        if (simd::enabled && n == W) with_blocks.template operator()<1>();
        else if (simd::enabled && n == 2 * W) with_blocks.template operator()<2>();
        else with_blocks.template operator()<0>();
        for (int i = 0; i < CB; ++i) {
            if (carried_acc) {
                carried_acc[c0 + i] = acc[i];
                carried_tail[c0 + i] = tail[i];
            } else {
                db[c0 + i] += simd::hsum<T>(acc[i]) + tail[i];
            }
        }
    });
}
}  // namespace detail

// dy[(p * C + c) * n + j] <- dz = Act::pullback(dy, s) at the same place, and db[c] += sum over the P
// pixels and n samples of dz: a convolution's activation pullback and bias gradient in one pass over
// dz, where two passes read it twice. Each row's last n % W values go through the scalar Act::pullback,
// so for an activation whose scalar and vector forms round differently (exp-based ones) dz can differ in
// the last bits from a flat activation_pullback when n is not a multiple of W; the order is fixed either
// way.
// Channels go in blocks of up to 4 so that their sums stay in registers; every lane of a channel's sum
// adds the pixels in order, then the lanes are added.
template <class Act, class T>
void activation_pullback_channel_sums(size_t P, size_t C, T* dy, const T* s, size_t n, T* db) {
    detail::activation_pullback_channel_sums_carried<Act>(P, C, dy, s, n, db, static_cast<simd::vec<T>*>(nullptr),
                                                          static_cast<T*>(nullptr));
}

// A convolution's activation pullback and parameter gradients: dz = Act::pullback(dy, s) in place of dy
// and db += its channel sums (activation_pullback_channel_sums), then g += the weight gradient
// (conv_weight_grad), with the bits of those two calls. Where dz is larger than L1 (LeNet5's first
// convolution: 24 x 24 x 6 rows of a chunk of 16, 221 KB), those two passes each read it from L2, the
// weight gradient once per tile; here, when conv_band_rows says so, both run band by band over a few
// rows of output pixels, whose dz the tiles then read from L1. Every accumulator (each tile's and each
// channel's sum) is carried from band to band as a whole vector and summed horizontally after the last
// band, so every sum takes its terms in the order of the two calls, with every tile's pixels forward
// (conv_weight_grad<false, Sweeps::forward>: bands cannot sweep backward), so the same bits.
//
// Without bands, given dz_blocks (P * OC * n values) and where conv_dz_blocks(OC) holds, dz is also
// written there in blocks of 4 channels (DzLayout::blocks), and the weight gradient reads it from there,
// block by block. In the layers' layout a pixel's dz rows are OC * n apart: 1 KiB for LeNet5's second
// convolution on a chunk of 16, so the 256 rows a 4-channel tile sweeps fall on 16 of L1's 64 sets, 16
// per set against its 12 ways, and evict each other and the input rows. A block's rows are contiguous,
// and every row's tile reads it from L1. Each tile takes 4 channels either way (OC a multiple of 4 and
// 32 vector registers: 6 x 4 in float, 4 x 4 in double), so the sums are the same.
inline constexpr size_t conv_band_bytes = 20 * 1024;      // dz per band, about two thirds of a 32 KiB L1
inline constexpr size_t conv_band_min_bytes = 64 * 1024;  // whole dz from which bands are used
inline constexpr size_t conv_band_channels = 64;          // carried channel sums, OC at most

// Output rows per band for conv_activation_parameter_grads, or 0 for one pass: bands only when the
// chunk is one or two vectors of samples (one sweep of the pixels per tile, so carrying a tile's
// accumulators does not change the order of its sums), dz exceeds conv_band_min_bytes and the carried
// accumulators fit their (stack) buffers.
template <class T>
constexpr size_t conv_band_rows(const ConvShape& s, size_t n) {
    constexpr size_t W = simd::width<T>;
    const size_t row_bytes = s.OW * s.OC * n * sizeof(T), rows = std::max<size_t>(1, conv_band_bytes / row_bytes);
    const bool banded = simd::enabled && (n == W || n == 2 * W) && s.OH * row_bytes > conv_band_min_bytes &&
                        rows < s.OH && s.K() * s.OC <= conv_band_state && s.OC <= conv_band_channels;
    return banded ? rows : 0;
}

// Whether conv_activation_parameter_grads copies dz into blocks of channels: where every weight-gradient
// tile takes 4 channels (32 vector registers, OC a multiple of 4), and OC > 4 (with 4 channels the
// layers' layout already is one block).
constexpr bool conv_dz_blocks(size_t OC) {
    return simd::enabled && simd::vector_registers >= 32 && OC % conv_dz_block == 0 && OC > conv_dz_block;
}

// The banded route of conv_activation_parameter_grads, with bands of `rows` output rows (the last may
// be shorter): band_dz(r0, r1) returns where output rows [r0, r1) of dy are, writable (rows * OW * OC *
// n values), and the band's dz is left there. conv_activation_parameter_grads passes dy's own rows; a
// caller that computes dy band by band can instead write each band into one small buffer, which then
// stays in L1 (where dy comes from a pooling's pullback: LeNet5's first convolution and its pooling,
// docs/design.md). Needs what conv_band_rows<T>(s, n) > 0 says of s and n; rows may be any
// height >= 1: every sum takes its terms in the same order for every band height.
template <class Act, class T, class BandDz>
void conv_activation_parameter_grads_banded(const ConvShape& s, const T* in, const T* act_s, size_t n, T* g, T* db,
                                            size_t rows, BandDz&& band_dz) {
    using V = simd::vec<T>;
    constexpr size_t W = simd::width<T>;
    const DzLayout layout = DzLayout::rows(s.OC, n);
    V tiles[conv_band_state], sums[conv_band_channels];
    T tails[conv_band_channels];
    std::fill_n(tiles, s.K() * s.OC, V(T(0)));
    std::fill_n(sums, s.OC, V(T(0)));
    std::fill_n(tails, s.OC, T(0));
    // one input channel: the sliding tiles of conv_weight_grad's one-channel route, their sums in tiles[k * OC + oc]
    const bool one_channel = detail::conv_weight_grad_one_channel_fits<T>(s, n);
    for (size_t r0 = 0; r0 < s.OH; r0 += rows) {
        ConvShape band = s;
        band.OH = std::min(rows, s.OH - r0);
        const size_t pixel0 = r0 * s.OW;
        T* const dz = band_dz(r0, r0 + band.OH);
        detail::activation_pullback_channel_sums_carried<Act>(band.OH * s.OW, s.OC, dz, act_s + pixel0 * s.OC * n, n,
                                                              db, sums, tails);
        const T* band_in = in + r0 * s.IW * s.IC * n;
        if (one_channel) {
            detail::conv_weight_grad_one_channel(band, band_in, static_cast<const T*>(dz), n, tiles);
            continue;
        }
        V* carried = tiles;
        detail::for_weight_grad_tiles<T>(band, [&]<int MR, int PR>(size_t k0, size_t oc0, bool) {
            if (n == W)
                detail::conv_weight_grad_sweep<V, MR, PR, 1, W>(band, band_in, dz, layout, n, k0, oc0, 0, n, carried);
            else
                detail::conv_weight_grad_sweep<V, MR, PR, 2, 2 * W>(band, band_in, dz, layout, n, k0, oc0, 0, n, carried);
            carried += MR * PR;
        });
    }
    for (size_t c = 0; c < s.OC; ++c) db[c] += simd::hsum<T>(sums[c]) + tails[c];
    detail::conv_weight_grad_add_carried(s, static_cast<const V*>(tiles),
                                         one_channel ? detail::CarriedLayout::by_weight : detail::CarriedLayout::by_tile, g);
}

template <class Act, class T>
void conv_activation_parameter_grads(const ConvShape& s, const T* in, T* dy, const T* act_s, size_t n, T* g, T* db,
                                     T* dz_blocks = nullptr) {
    using V = simd::vec<T>;
    const size_t rows = conv_band_rows<T>(s, n);
    if (rows == 0) {
        const size_t P = s.OH * s.OW;
        if (dz_blocks && conv_dz_blocks(s.OC)) {
            detail::activation_pullback_channel_sums_carried<Act>(P, s.OC, dy, act_s, n, db, static_cast<V*>(nullptr),
                                                                  static_cast<T*>(nullptr), dz_blocks);
            conv_weight_grad<true>(s, in, static_cast<const T*>(dz_blocks), DzLayout::blocks(P, n), n, g);
        } else {
            activation_pullback_channel_sums<Act>(P, s.OC, dy, act_s, n, db);
            conv_weight_grad(s, in, dy, n, g);
        }
        return;
    }
    conv_activation_parameter_grads_banded<Act>(s, in, act_s, n, g, db, rows,
                                                [&](size_t r0, size_t) { return dy + r0 * s.OW * s.OC * n; });
}

template <class Act, class T>
void activation_pullback_channel_sums_reference(size_t P, size_t C, T* dy, const T* s, size_t n, T* db) {
    for (size_t p = 0; p < P; ++p)
        for (size_t c = 0; c < C; ++c)
            for (size_t j = 0; j < n; ++j) {
                const size_t e = (p * C + c) * n + j;
                dy[e] = Act::pullback(dy[e], s[e]);
                db[c] += dy[e];
            }
}

// The window rows of a zero-padded image, for an image that only conv_valid reads, with the window
// [top, top + H) x [left, left + W) as its non-zero rows and columns: rows [top, top + H) of dst receive
// src's rows with `left` and `right` zero pixels around them, and the rows above and below are not
// written (pad_copy below writes them too). conv_valid never reads an input
// row outside [row0, row1) (it skips the kernel rows that fall there), only zero columns beside the
// window. For the input gradient of LeNet5's second convolution it writes half of pad_copy's bytes
// and leaves half of the padded buffer out of the cache.
template <class T>
void pad_copy_sides(const T* src, size_t H, size_t W, size_t C, size_t n, size_t top, size_t left, size_t right,
                    T* dst) {
    const size_t DW = W + left + right, row = C * n;
    for (size_t y = 0; y < H; ++y) {
        T* d = dst + (y + top) * DW * row;
        std::fill_n(d, left * row, T(0));
        std::memcpy(d + left * row, src + y * W * row, W * row * sizeof(T));
        std::fill_n(d + (left + W) * row, right * row, T(0));
    }
}

// dst ((H + top + bottom) x (W + left + right) x C rows of n) = src (H x W x C) surrounded by zeros:
// the zero rows above, pad_copy_sides's rows of the window, the zero rows below.
template <class T>
void pad_copy(const T* src, size_t H, size_t W, size_t C, size_t n, size_t top, size_t left, size_t bottom,
              size_t right, T* dst) {
    const size_t padded_row = (W + left + right) * C * n;
    std::fill_n(dst, top * padded_row, T(0));
    pad_copy_sides(src, H, W, C, n, top, left, right, dst);
    std::fill_n(dst + (top + H) * padded_row, bottom * padded_row, T(0));
}

template <class T>
void pad_copy_reference(const T* src, size_t H, size_t W, size_t C, size_t n, size_t top, size_t left, size_t bottom,
                        size_t right, T* dst) {
    const size_t DH = H + top + bottom, DW = W + left + right;
    for (size_t y = 0; y < DH; ++y)
        for (size_t x = 0; x < DW; ++x)
            for (size_t e = 0; e < C * n; ++e) {
                const bool inside = y >= top && y < top + H && x >= left && x < left + W;
                dst[(y * DW + x) * C * n + e] = inside ? src[((y - top) * W + (x - left)) * C * n + e] : T(0);
            }
}

}  // namespace chainlet::kernels
