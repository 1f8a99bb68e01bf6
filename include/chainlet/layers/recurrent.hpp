// What GRU and LSTM (layers/gru.hpp, layers/lstm.hpp) share: the sequence shape rule, the parameter
// layout and its PyTorch names, PyTorch's initialisation, and the two products every step makes.
//
// A sequence sample is Input<T, F>: T steps of F features, row-major (t, f) per sample, so in a chunk
// of n samples feature f of step t of sample s sits at [(t * F + f) * n + s], and step t is an F x n
// block at x + t * F * n. A recurrent layer with G = 3H (GRU) or 4H (LSTM) gate rows keeps, in order:
//   W_ih  input-major,  W_ih[f * G + g]     (the transpose of PyTorch's weight_ih_l0 [G, F])
//   W_hh  hidden-major, W_hh[j * G + g]     (the transpose of PyTorch's weight_hh_l0 [G, H])
//   b_ih  (G values), b_hh (G values)       (PyTorch's bias_ih_l0, bias_hh_l0)
// with the gate rows in PyTorch's order. Input-major weights make each step's products a gemm_nn
// along the samples (W X_t, W^T dG) and the weight gradients a gemm_nt (X_t dG^T), as in Dense.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "chainlet/kernel_instances.hpp"
#include "chainlet/kernels/gemm.hpp"
#include "chainlet/kernels/vector_loop.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet::detail {

// The sequence shape rule of GRU and LSTM, with the output shape: the last hidden state (H) or the
// whole sequence of hidden states (T, H), which another recurrent layer can read.
// `rejects` is the layers' rejects_shape (layer.hpp). The other members stay valid when it is true (any
// rank, H = 0 gives a 1-wide shape), so that its assertion is the only error.
template <class InShape, std::size_t H>
constexpr bool recurrent_rejects() {
    static_assert(InShape::rank == 2,
                  "GRU/LSTM need a sequence input Input<T, F> (T steps of F features per sample); an image "
                  "(H, W, C) or a flat vector is not a sequence: reshape it, e.g. Input<T, 1> for T scalars");
    static_assert(InShape::rank != 2 || H > 0, "GRU/LSTM<H>: H (hidden units) must be positive");
    return InShape::rank != 2 || H == 0;
}
template <class InShape, std::size_t H, bool ReturnSequence>
struct recurrent_shape {
    static constexpr bool rejects = recurrent_rejects<InShape, H>();
    static constexpr std::size_t steps = InShape::dims[0];
    static constexpr std::size_t features = InShape::dims[InShape::rank - 1];
    static constexpr std::size_t width = H > 0 ? H : 1;
    using out_shape = std::conditional_t<ReturnSequence, Shape<steps, width>, Shape<width>>;
};

// Offsets of the four parameter blocks for G gate rows.
template <std::size_t F, std::size_t H, std::size_t G>
struct recurrent_params {
    static constexpr std::size_t w_ih = 0, w_hh = F * G, b_ih = w_hh + H * G, b_hh = b_ih + G, count = b_hh + G;

    // PyTorch's default for nn.GRU/nn.LSTM: every parameter U(-1/sqrt(H), 1/sqrt(H)).
    template <class T>
    static void init(std::span<T> p, Rng& rng) {
        const double bound = 1.0 / std::sqrt(static_cast<double>(H));
        for (auto& v : p) v = static_cast<T>(bound * (2 * rng.uniform() - 1));
    }

    // The module's tensors: weight_ih_l0 [G, F], weight_hh_l0 [G, H], bias_ih_l0 [G], bias_hh_l0 [G].
    static void torch_layout(TorchModules& m, std::size_t offset) {
        const std::string name = m.next_module();
        TorchTensor wih{name + ".weight_ih_l0", {G, F}, std::vector<std::size_t>(G * F)};
        TorchTensor whh{name + ".weight_hh_l0", {G, H}, std::vector<std::size_t>(G * H)};
        TorchTensor bih{name + ".bias_ih_l0", {G}, std::vector<std::size_t>(G)};
        TorchTensor bhh{name + ".bias_hh_l0", {G}, std::vector<std::size_t>(G)};
        for (std::size_t g = 0; g < G; ++g) {
            for (std::size_t f = 0; f < F; ++f) wih.source[g * F + f] = offset + w_ih + f * G + g;
            for (std::size_t j = 0; j < H; ++j) whh.source[g * H + j] = offset + w_hh + j * G + g;
            bih.source[g] = offset + b_ih + g;
            bhh.source[g] = offset + b_hh + g;
        }
        m.add(std::move(wih));
        m.add(std::move(whh));
        m.add(std::move(bih));
        m.add(std::move(bhh));
        m.natural_order();
        m.time_major_sequence();  // nn.GRU/nn.LSTM(batch_first=True) give (batch, T, H), the order chainlet keeps
    }
};

// out (M x n) = bias + W in, W(g, k) = w[k * ldw + g], in (K x n). One sample: a gemv along the rows.
template <class T>
inline void project(std::size_t M, std::size_t n, std::size_t K, const T* w, std::size_t ldw, const T* in, const T* bias,
                    T* out) {
    using namespace kernels;
    if (n == 1)
        gemv_t<NoEpilogue>(M, K, in, w, ldw, bias, out);
    else
        gemm_nn<NoEpilogue, Init::row_bias>(M, n, K, w, unit_stride, static_cast<std::ptrdiff_t>(ldw), in, n, out, n,
                                            bias);
}

// out (M x n) += W in, as project.
template <class T>
inline void project_add(std::size_t M, std::size_t n, std::size_t K, const T* w, std::size_t ldw, const T* in, T* out) {
    using namespace kernels;
    if (n == 1)
        gemv_t<NoEpilogue>(M, K, in, w, ldw, out, out);  // in place: each output is read as bias before it is written
    else
        gemm_nn<NoEpilogue, Init::accumulate>(M, n, K, w, unit_stride, static_cast<std::ptrdiff_t>(ldw), in, n, out, n);
}

// The pullback of out = W in through one step: dW += in dOut^T (gw[k * ldw + g]), and
// din (K x n) = W^T dOut (overwritten; skipped when din is null).
template <class T>
inline void project_pullback(std::size_t M, std::size_t n, std::size_t K, const T* w, std::size_t ldw, const T* in,
                             const T* dout, T* gw, T* din) {
    using namespace kernels;
    gemm_nt(K, M, n, in, n, dout, n, gw, ldw);
    if (din) gemm_nn<NoEpilogue, Init::zero>(K, n, M, w, static_cast<std::ptrdiff_t>(ldw), 1, dout, n, din, n);
}

// Accurate sigmoid and tanh for the gates (the float tanh of activations.hpp is a rational fit, good
// for an activation but not for values fed back T times).
template <class V>
inline V gate_sigmoid(V z) {
    return V(1) / (V(1) + simd::exp(-z));
}
template <class V>
inline V gate_tanh(V z) {
    return simd::tanh_exact(z);
}

}  // namespace chainlet::detail
