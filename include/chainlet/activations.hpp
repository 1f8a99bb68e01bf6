// Activation functions, fused into the layers that use them (Dense<N, Tanh>).
//
// Each one gives y = f(z) and the pullback dL/dz = dL/dy * f'(z). Where f' can be written from the
// output y alone (identity, ReLU, tanh, sigmoid) the layer keeps only y, and `pullback` receives y;
// otherwise (softplus, GELU) the layer also keeps z, and `pullback` receives z. Every function is a
// template on V, which is either a scalar or an xsimd batch: the same body is the SIMD loop, its
// scalar tail and the scalar reference of the tests.
#pragma once

#include "chainlet/kernels/simd.hpp"

#include <array>
#include <cstdint>
#include <string_view>

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

// ---- ELU, LeakyReLU, SiLU, exact GELU (issue 13) ----

namespace detail {

// Scalar and SIMD forms of the special functions the activations below need (xsimd 8 provides
// expm1, erfc for batches; scalars take the standard library's).
template <class V>
inline V expm1(V a) {
#ifndef CHAINLET_SCALAR
    if constexpr (simd::is_vector<V>) return xsimd::expm1(a);
    else
#endif
        return std::expm1(a);
}
template <class V>
inline V erfc(V a) {
#ifndef CHAINLET_SCALAR
    if constexpr (simd::is_vector<V>) return xsimd::erfc(a);
    else
#endif
        return std::erfc(a);
}

// "leaky_relu(1/100)": the name of LeakyReLU<Num, Den>, built at compile time.
template <std::intmax_t Num, std::intmax_t Den>
struct ratio_text {
    static constexpr auto text = [] {
        std::array<char, 64> s{};
        std::size_t k = 0;
        for (const char c : std::string_view("leaky_relu(")) s[k++] = c;
        auto put = [&](std::intmax_t v) {
            char digits[24];
            std::size_t d = 0;
            do {
                digits[d++] = static_cast<char>('0' + v % 10);
                v /= 10;
            } while (v > 0);
            while (d > 0) s[k++] = digits[--d];
        };
        put(Num);
        s[k++] = '/';
        put(Den);
        s[k++] = ')';
        return s;
    }();
};

}  // namespace detail

// ELU with alpha = 1 (PyTorch's nn.ELU()): z for z > 0, e^z - 1 otherwise.
struct ELU {
    static constexpr const char* name = "elu";
    static constexpr bool derivative_from_output = true;
    template <class V>
    static V value(V z) { return simd::select(z > V(0), z, detail::expm1(z)); }
    // f' = 1 for z > 0, e^z = y + 1 otherwise (y > 0 exactly when z > 0)
    template <class V>
    static V pullback(V dy, V y) { return simd::select(y > V(0), dy, dy * (y + V(1))); }
};

// LeakyReLU with slope Num / Den for z < 0 (PyTorch's nn.LeakyReLU(Num / Den)); the default 1/100 is
// PyTorch's default 0.01. A ratio of integers rather than a floating-point template argument, so that the
// slope is exact in the type's name and in the checkpoint text ("leaky_relu(1/100)"). The slope must be
// positive, so that the sign of the output tells the branch and the pullback needs only y.
template <std::intmax_t Num = 1, std::intmax_t Den = 100>
struct LeakyReLU {
    static_assert(Num > 0 && Den > 0, "LeakyReLU<Num, Den>: the slope Num / Den must be positive");
    static constexpr double slope = static_cast<double>(Num) / static_cast<double>(Den);
    static constexpr const char* name = detail::ratio_text<Num, Den>::text.data();
    static constexpr bool derivative_from_output = true;
    template <class V>
    static V value(V z) {
        using T = simd::scalar_t<V>;
        return simd::select(z > V(0), z, V(static_cast<T>(slope)) * z);
    }
    // f' = 1 for y > 0, slope otherwise (at z = 0 the slope is used)
    template <class V>
    static V pullback(V dy, V y) {
        using T = simd::scalar_t<V>;
        return simd::select(y > V(0), dy, V(static_cast<T>(slope)) * dy);
    }
};

// SiLU (Swish): z sigmoid(z) (PyTorch's nn.SiLU()).
struct SiLU {
    static constexpr const char* name = "silu";
    static constexpr bool derivative_from_output = false;
    template <class V>
    static V value(V z) { return z / (V(1) + simd::exp(-z)); }
    // f' = s + z s (1 - s) = s (1 + z (1 - s)),  s = sigmoid(z)
    template <class V>
    static V pullback(V dy, V z) {
        const V s = V(1) / (V(1) + simd::exp(-z));
        return dy * s * simd::fma(z, V(1) - s, V(1));
    }
};
using Swish = SiLU;

// GELU in its exact form: z Phi(z), Phi the standard normal CDF (PyTorch's nn.GELU(), approximate="none").
// Phi(z) = erfc(-z / sqrt 2) / 2, which keeps its relative accuracy for negative z where 1 + erf cancels.
struct GELUExact {
    static constexpr const char* name = "gelu_erf";
    static constexpr bool derivative_from_output = false;
    template <class V>
    static V cdf(V z) {
        using T = simd::scalar_t<V>;
        return V(T(0.5)) * detail::erfc(V(T(-0.70710678118654752440)) * z);
    }
    template <class V>
    static V value(V z) { return z * cdf(z); }
    // f' = Phi(z) + z phi(z),  phi(z) = e^(-z^2 / 2) / sqrt(2 pi)
    template <class V>
    static V pullback(V dy, V z) {
        using T = simd::scalar_t<V>;
        const V phi = V(T(0.39894228040143267794)) * simd::exp(V(T(-0.5)) * z * z);
        return dy * simd::fma(z, phi, cdf(z));
    }
};

}  // namespace chainlet
