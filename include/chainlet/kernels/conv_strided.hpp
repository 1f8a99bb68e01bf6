// Strided and dilated convolution kernels on feature-major chunks (row r of n samples at [r * n + s]),
// for the convolutions the stride-1 kernels of conv.hpp do not cover: Conv with stride > 1 and Conv1D
// with stride or dilation > 1. Same image layout and weight layout as conv.hpp: an image of IH x IW
// pixels and IC channels is IH * IW * IC rows, row (y * IW + x) * IC + c; the weight of tap
// k = (ky * KW + kx) * IC + c and output channel oc is w[k * OC + oc]. The input is already padded.
//
//   out[oy, ox, oc] = Act(bias[oc] + sum_k w[k, oc] in[oy SH + ky DH, ox SW + kx DW, c])
//   strided_conv_weight_grad: g[k, oc] += sum over output pixels and samples of in[tap k] dz[oc]
//   strided_conv_input_grad:  din[tap k of pixel p] = sum_{p, oc} w[k, oc] dz[p, oc]  (din overwritten)
//   crop_copy:                the inverse of conv.hpp's pad_copy (the input gradient without its padding)
//
// Clear loop nests vectorised along the samples: a register block of up to 4 output channels times one
// vector of samples, so they need a chunk of at least one vector of samples to use the SIMD units.
// Each has a scalar twin (_reference) written straight from the formula.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "chainlet/kernels/simd.hpp"
#include "chainlet/kernels/vector_loop.hpp"

namespace chainlet::kernels {

struct StridedConvShape {
    std::size_t IH, IW, IC;  // input (after padding)
    std::size_t OH, OW, OC;  // output
    std::size_t KH, KW;      // kernel
    std::size_t SH, SW;      // stride
    std::size_t DH, DW;      // dilation
    constexpr std::size_t K() const { return KH * KW * IC; }
    // The input row of tap (ky, kx, channel 0) for output pixel (oy, ox).
    constexpr std::size_t tap_row(std::size_t oy, std::size_t ox, std::size_t ky, std::size_t kx) const {
        return ((oy * SH + ky * DH) * IW + ox * SW + kx * DW) * IC;
    }
};

namespace detail {

// Calls f.template operator()<MB>(oc0) for blocks of MB = 4 output channels, then single channels.
template <class F>
inline void for_channel_blocks(std::size_t OC, F&& f) {
    std::size_t oc = 0;
    for (; oc + 4 <= OC; oc += 4) f.template operator()<4>(oc);
    for (; oc < OC; ++oc) f.template operator()<1>(oc);
}

}  // namespace detail

// out = Act(z), z = bias + correlation; z is stored when non-null (activations that need it).
template <class Act, class T>
void strided_conv_forward(const StridedConvShape& s, const T* w, const T* bias, const T* in, std::size_t n, T* out,
                          T* z) {
    for (std::size_t oy = 0; oy < s.OH; ++oy)
        for (std::size_t ox = 0; ox < s.OW; ++ox) {
            const std::size_t out0 = (oy * s.OW + ox) * s.OC;
            detail::for_channel_blocks(s.OC, [&]<int MB>(std::size_t oc0) {
                vectors_then_scalars<T>(n, [&]<class V>(std::size_t v) {
                    V acc[MB];
                    for (int j = 0; j < MB; ++j) acc[j] = V(bias[oc0 + j]);
                    for (std::size_t ky = 0; ky < s.KH; ++ky)
                        for (std::size_t kx = 0; kx < s.KW; ++kx) {
                            const T* x = in + s.tap_row(oy, ox, ky, kx) * n + v;
                            const T* wk = w + (ky * s.KW + kx) * s.IC * s.OC + oc0;
                            for (std::size_t c = 0; c < s.IC; ++c, x += n, wk += s.OC) {
                                const V xv = simd::loadv<V>(x);
                                for (int j = 0; j < MB; ++j) acc[j] = simd::fma(V(wk[j]), xv, acc[j]);
                            }
                        }
                    for (int j = 0; j < MB; ++j) {
                        const std::size_t at = (out0 + oc0 + static_cast<std::size_t>(j)) * n + v;
                        if (z) simd::storev(z + at, acc[j]);
                        simd::storev(out + at, Act::value(acc[j]));
                    }
                });
            });
        }
}

template <class Act, class T>
void strided_conv_forward_reference(const StridedConvShape& s, const T* w, const T* bias, const T* in, std::size_t n,
                                    T* out, T* z) {
    for (std::size_t oy = 0; oy < s.OH; ++oy)
        for (std::size_t ox = 0; ox < s.OW; ++ox)
            for (std::size_t oc = 0; oc < s.OC; ++oc)
                for (std::size_t j = 0; j < n; ++j) {
                    T acc = bias[oc];
                    for (std::size_t ky = 0; ky < s.KH; ++ky)
                        for (std::size_t kx = 0; kx < s.KW; ++kx)
                            for (std::size_t c = 0; c < s.IC; ++c)
                                acc += w[((ky * s.KW + kx) * s.IC + c) * s.OC + oc] *
                                       in[(s.tap_row(oy, ox, ky, kx) + c) * n + j];
                    const std::size_t at = ((oy * s.OW + ox) * s.OC + oc) * n + j;
                    if (z) z[at] = acc;
                    out[at] = Act::value(acc);
                }
}

// g[k * OC + oc] += sum_{pixels p, samples j} in[tap k of p][j] dz[p, oc][j]. A block of up to 4 output
// channels keeps one vector accumulator each through all pixels; the tail samples sum as scalars.
template <class T>
void strided_conv_weight_grad(const StridedConvShape& s, const T* in, const T* dz, std::size_t n, T* g) {
    for (std::size_t ky = 0; ky < s.KH; ++ky)
        for (std::size_t kx = 0; kx < s.KW; ++kx)
            for (std::size_t c = 0; c < s.IC; ++c) {
                const std::size_t k = (ky * s.KW + kx) * s.IC + c;
                detail::for_channel_blocks(s.OC, [&]<int MB>(std::size_t oc0) {
                    T total[MB] = {};
                    vectors_then_scalars<T>(n, [&]<class V>(std::size_t v) {
                        V acc[MB];
                        for (int j = 0; j < MB; ++j) acc[j] = V(T(0));
                        for (std::size_t oy = 0; oy < s.OH; ++oy)
                            for (std::size_t ox = 0; ox < s.OW; ++ox) {
                                const V xv = simd::loadv<V>(in + (s.tap_row(oy, ox, ky, kx) + c) * n + v);
                                const T* d = dz + ((oy * s.OW + ox) * s.OC + oc0) * n + v;
                                for (int j = 0; j < MB; ++j)
                                    acc[j] = simd::fma(xv, simd::loadv<V>(d + static_cast<std::size_t>(j) * n), acc[j]);
                            }
                        for (int j = 0; j < MB; ++j) {
                            if constexpr (simd::is_vector<V>) total[j] += simd::hsum<T>(acc[j]);
                            else total[j] += acc[j];
                        }
                    });
                    for (int j = 0; j < MB; ++j) g[k * s.OC + oc0 + static_cast<std::size_t>(j)] += total[j];
                });
            }
}

template <class T>
void strided_conv_weight_grad_reference(const StridedConvShape& s, const T* in, const T* dz, std::size_t n, T* g) {
    for (std::size_t ky = 0; ky < s.KH; ++ky)
        for (std::size_t kx = 0; kx < s.KW; ++kx)
            for (std::size_t c = 0; c < s.IC; ++c)
                for (std::size_t oc = 0; oc < s.OC; ++oc) {
                    T acc = 0;
                    for (std::size_t oy = 0; oy < s.OH; ++oy)
                        for (std::size_t ox = 0; ox < s.OW; ++ox)
                            for (std::size_t j = 0; j < n; ++j)
                                acc += in[(s.tap_row(oy, ox, ky, kx) + c) * n + j] *
                                       dz[((oy * s.OW + ox) * s.OC + oc) * n + j];
                    g[((ky * s.KW + kx) * s.IC + c) * s.OC + oc] += acc;
                }
}

// din (IH x IW x IC rows of n, overwritten) = sum over output pixels p and taps k of w[k, oc] dz[p, oc],
// scattered to the input row that tap k of p read. Pixels in row-major order, so the sum order is fixed.
template <class T>
void strided_conv_input_grad(const StridedConvShape& s, const T* w, const T* dz, std::size_t n, T* din) {
    std::fill_n(din, s.IH * s.IW * s.IC * n, T(0));
    for (std::size_t oy = 0; oy < s.OH; ++oy)
        for (std::size_t ox = 0; ox < s.OW; ++ox) {
            const T* d = dz + (oy * s.OW + ox) * s.OC * n;
            for (std::size_t ky = 0; ky < s.KH; ++ky)
                for (std::size_t kx = 0; kx < s.KW; ++kx)
                    for (std::size_t c = 0; c < s.IC; ++c) {
                        T* x = din + (s.tap_row(oy, ox, ky, kx) + c) * n;
                        const T* wk = w + ((ky * s.KW + kx) * s.IC + c) * s.OC;
                        vectors_then_scalars<T>(n, [&]<class V>(std::size_t v) {
                            V acc = simd::loadv<V>(x + v);
                            for (std::size_t oc = 0; oc < s.OC; ++oc)
                                acc = simd::fma(V(wk[oc]), simd::loadv<V>(d + oc * n + v), acc);
                            simd::storev(x + v, acc);
                        });
                    }
        }
}

template <class T>
void strided_conv_input_grad_reference(const StridedConvShape& s, const T* w, const T* dz, std::size_t n, T* din) {
    std::fill_n(din, s.IH * s.IW * s.IC * n, T(0));
    for (std::size_t oy = 0; oy < s.OH; ++oy)
        for (std::size_t ox = 0; ox < s.OW; ++ox)
            for (std::size_t ky = 0; ky < s.KH; ++ky)
                for (std::size_t kx = 0; kx < s.KW; ++kx)
                    for (std::size_t c = 0; c < s.IC; ++c)
                        for (std::size_t j = 0; j < n; ++j) {
                            T acc = din[(s.tap_row(oy, ox, ky, kx) + c) * n + j];
                            for (std::size_t oc = 0; oc < s.OC; ++oc)
                                acc += w[((ky * s.KW + kx) * s.IC + c) * s.OC + oc] *
                                       dz[((oy * s.OW + ox) * s.OC + oc) * n + j];
                            din[(s.tap_row(oy, ox, ky, kx) + c) * n + j] = acc;
                        }
}

// dst (H x W x C rows of n) = the middle of src ((H + top + bottom) x (W + left + right) x C).
template <class T>
void crop_copy(const T* src, std::size_t H, std::size_t W, std::size_t C, std::size_t n, std::size_t top,
               std::size_t left, std::size_t right, T* dst) {
    const std::size_t SW = W + left + right, row = C * n;
    for (std::size_t y = 0; y < H; ++y)
        std::memcpy(dst + y * W * row, src + ((y + top) * SW + left) * row, W * row * sizeof(T));
}

}  // namespace chainlet::kernels
