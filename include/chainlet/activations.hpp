// Activation functions, fused into the layers that use them (Dense<N, Tanh>).
//
// Each one gives y = f(z) and the pullback dL/dz = dL/dy * f'(z). Where f' can be written from the
// output y alone (identity, ReLU, tanh, sigmoid) the layer keeps only y, and `pullback` receives y;
// otherwise (softplus, GELU) the layer also keeps z, and `pullback` receives z. Every function is a
// template on V, which is either a scalar or an xsimd batch: the same body is the SIMD loop, its
// scalar tail and the scalar reference of the tests.
#pragma once

#include "chainlet/kernels/simd.hpp"

namespace chainlet {

struct Identity {
    static constexpr const char* name = "identity";
    static constexpr bool derivative_from_output = true;
    template <class V>
    static V value(V z) { return z; }
    template <class V>
    static V pullback(V dy, V /*y*/) { return dy; }
};

struct ReLU {
    static constexpr const char* name = "relu";
    static constexpr bool derivative_from_output = true;
    template <class V>
    static V value(V z) { return simd::max(z, V(0)); }
    // f'(z) = [z > 0] = [y > 0]; at z = 0 the subgradient 0 is used.
    template <class V>
    static V pullback(V dy, V y) { return simd::select(y > V(0), dy, V(0)); }
};

struct Tanh {
    static constexpr const char* name = "tanh";
    static constexpr bool derivative_from_output = true;
    template <class V>
    static V value(V z) { return simd::tanh(z); }
    // f' = 1 - y^2
    template <class V>
    static V pullback(V dy, V y) { return dy * simd::fma(-y, y, V(1)); }
};

struct Sigmoid {
    static constexpr const char* name = "sigmoid";
    static constexpr bool derivative_from_output = true;
    template <class V>
    static V value(V z) { return V(1) / (V(1) + simd::exp(-z)); }
    // f' = y (1 - y)
    template <class V>
    static V pullback(V dy, V y) { return dy * (y - y * y); }
};

struct Softplus {
    static constexpr const char* name = "softplus";
    static constexpr bool derivative_from_output = false;
    // log(1 + e^z) = max(z, 0) + log1p(e^-|z|), which neither overflows nor loses small values.
    template <class V>
    static V value(V z) { return simd::max(z, V(0)) + simd::log1p(simd::exp(-simd::abs(z))); }
    // f' = sigmoid(z)
    template <class V>
    static V pullback(V dy, V z) { return dy / (V(1) + simd::exp(-z)); }
};

// GELU in its tanh form: 0.5 z (1 + tanh(u)), u = sqrt(2/pi) (z + 0.044715 z^3)
// (PyTorch's GELU(approximate="tanh")), evaluated as z s with s = 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)),
// which keeps its relative accuracy for negative z where 1 + tanh(u) cancels.
struct GELU {
    static constexpr const char* name = "gelu";
    static constexpr bool derivative_from_output = false;
    template <class V>
    static V inner(V z) {
        using T = simd::scalar_t<V>;
        const V k(T(0.7978845608028654));  // sqrt(2/pi)
        return k * simd::fma(V(T(0.044715)) * z, z * z, z);
    }
    template <class V>
    static V gate(V z) { return V(1) / (V(1) + simd::exp(V(-2) * inner(z))); }
    template <class V>
    static V value(V z) { return z * gate(z); }
    // f' = s + 2 z s (1 - s) du/dz,  du/dz = sqrt(2/pi) (1 + 3 * 0.044715 z^2)
    template <class V>
    static V pullback(V dy, V z) {
        using T = simd::scalar_t<V>;
        const V s = gate(z);
        const V du = V(T(0.7978845608028654)) * simd::fma(V(T(3 * 0.044715)) * z, z, V(1));
        return dy * simd::fma(V(2) * z * (s - s * s), du, s);
    }
};

template <class A>
concept Activation = requires {
    { A::name };
    { A::derivative_from_output };
    { A::template value<float>(1.0f) };
    { A::template pullback<float>(1.0f, 1.0f) };
};

}  // namespace chainlet
