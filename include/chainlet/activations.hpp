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

// An activation's value and its first three derivatives at one z (scalar or SIMD batch), from `jet(z)`:
// the forward input-derivative pass uses f' and f'', its pullback also f''' (derivatives/taylor.hpp).
template <class V>
struct Jet {
    V value, d1, d2, d3;
};

struct Identity {
    static constexpr const char* name = "identity";
    static constexpr bool derivative_from_output = true;
    template <class V>
    static V value(V z) { return z; }
    template <class V>
    static V pullback(V dy, V /*y*/) { return dy; }
    // jet: y and f', f'', f''' at z (the input-derivative pass, derivatives/taylor.hpp).
    template <class V>
    static Jet<V> jet(V z) { return output_jet(z); }
    // output_jet: the same from y = f(z) (activations whose derivatives are functions of y; the
    // input-derivative pullback then reads the saved y instead of evaluating f again).
    template <class V>
    static Jet<V> output_jet(V y) { return {y, V(1), V(0), V(0)}; }
};

struct ReLU {
    static constexpr const char* name = "relu";
    static constexpr bool derivative_from_output = true;
    // 0 first: x86's max returns its second operand when one is NaN, so NaN stays NaN (as in PyTorch;
    // max(z, 0) made it 0). z = -0 gives -0.
    template <class V>
    static V value(V z) { return simd::max(V(0), z); }
    // f'(z) = [z > 0] = [y > 0]; at z = 0 the subgradient 0 is used.
    template <class V>
    static V pullback(V dy, V y) { return simd::select(y > V(0), dy, V(0)); }
    // f' = [z > 0], f'' = f''' = 0 (almost everywhere)
    template <class V>
    static Jet<V> jet(V z) { return output_jet(value(z)); }
    template <class V>
    static Jet<V> output_jet(V y) { return {y, simd::select(y > V(0), V(1), V(0)), V(0), V(0)}; }
};

struct Tanh {
    static constexpr const char* name = "tanh";
    static constexpr bool derivative_from_output = true;
    template <class V>
    static V value(V z) { return simd::tanh(z); }
    // f' = 1 - y^2
    template <class V>
    static V pullback(V dy, V y) { return dy * simd::fnma(y, y, V(1)); }
    // f' = 1 - y^2,  f'' = -2 y f',  f''' = -2 f' (1 - 3 y^2)
    template <class V>
    static Jet<V> jet(V z) { return output_jet(value(z)); }
    template <class V>
    static Jet<V> output_jet(V y) {
        const V d1 = simd::fnma(y, y, V(1));
        return {y, d1, V(-2) * y * d1, V(-2) * d1 * simd::fma(V(-3) * y, y, V(1))};
    }
};

struct Sigmoid {
    static constexpr const char* name = "sigmoid";
    static constexpr bool derivative_from_output = true;
    template <class V>
    static V value(V z) { return V(1) / (V(1) + simd::exp(-z)); }
    // f' = y (1 - y)
    template <class V>
    static V pullback(V dy, V y) { return dy * (y - y * y); }
    // f' = y (1 - y),  f'' = f' (1 - 2y),  f''' = f' (1 - 6y + 6y^2)
    template <class V>
    static Jet<V> jet(V z) { return output_jet(value(z)); }
    template <class V>
    static Jet<V> output_jet(V y) {
        const V d1 = y - y * y;
        return {y, d1, d1 * simd::fma(V(-2), y, V(1)), d1 * simd::fma(V(6), y * y - y, V(1))};
    }
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
    // f' = s = sigmoid(z),  f'' = s (1 - s),  f''' = s (1 - s)(1 - 2s)
    template <class V>
    static Jet<V> jet(V z) {
        const V s = V(1) / (V(1) + simd::exp(-z)), q = s - s * s;
        return {value(z), s, q, q * simd::fma(V(-2), s, V(1))};
    }
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
    // y = z s(z) with s = sigmoid(2u), u = k (z + c z^3). With q = s (1 - s), r = 1 - 2s and u', u'', u'''
    // the derivatives of u: s' = 2 q u', s'' = 4 q r u'^2 + 2 q u'',
    // s''' = q (8 r^2 u'^3 - 16 q u'^3 + 12 r u' u'' + 2 u'''); then
    // f' = s + z s',  f'' = 2 s' + z s'',  f''' = 3 s'' + z s'''.
    template <class V>
    static Jet<V> jet(V z) {
        using T = simd::scalar_t<V>;
        const T k = T(0.7978845608028654), c = T(0.044715);
        const V s = gate(z), q = s - s * s, r = simd::fma(V(-2), s, V(1));
        const V u1 = V(k) * simd::fma(V(T(3) * c) * z, z, V(1)), u2 = V(T(6) * k * c) * z, u3(T(6) * k * c);
        const V u1sq = u1 * u1;
        const V s1 = V(2) * q * u1;
        const V s2 = q * simd::fma(V(4) * r, u1sq, V(2) * u2);
        const V s3 = q * (u1sq * u1 * (V(8) * r * r - V(16) * q) + V(12) * r * u1 * u2 + V(2) * u3);
        return {z * s, simd::fma(z, s1, s), simd::fma(z, s2, V(2) * s1), simd::fma(z, s3, V(3) * s2)};
    }
};

template <class A>
concept Activation = requires {
    { A::name };
    { A::derivative_from_output };
    { A::template value<float>(1.0f) };
    { A::template pullback<float>(1.0f, 1.0f) };
};

// Whether a layer applies the activation inside its product's register tiles (the default) or in a
// pass of its own over the pre-activation after the product: an activation may declare
// `static constexpr bool fuse_into_product = false`. A fused activation's code is copied into each of the
// product's some thirty tile functions, once per instruction set, which for a long function (Sin's
// range reduction and two polynomials) multiplies a program's compile time and size; a separate pass
// reads and writes the output once more, which costs little next to such a function. Dense honours it;
// the convolutions fuse every activation.
template <class A>
inline constexpr bool fuses_into_product = true;
template <class A>
    requires requires { A::fuse_into_product; }
inline constexpr bool fuses_into_product<A> = A::fuse_into_product;

// ---- ELU, LeakyReLU, SiLU, exact GELU ----

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

// "leaky_relu(1/100)", "sin(30/1)": the name of an activation with a ratio of integers in it, built at
// compile time from its prefix ("leaky_relu(").
template <std::size_t N>
constexpr std::array<char, 64> ratio_name(const char (&prefix)[N], std::intmax_t num, std::intmax_t den) {
    std::array<char, 64> s{};
    std::size_t k = 0;
    for (std::size_t i = 0; i + 1 < N; ++i) s[k++] = prefix[i];
    auto put = [&](std::intmax_t v) {
        char digits[24];
        std::size_t d = 0;
        do {
            digits[d++] = static_cast<char>('0' + v % 10);
            v /= 10;
        } while (v > 0);
        while (d > 0) s[k++] = digits[--d];
    };
    put(num);
    s[k++] = '/';
    put(den);
    s[k++] = ')';
    return s;
}

}  // namespace detail

// ELU with alpha = 1 (PyTorch's nn.ELU()): z for z > 0, e^z - 1 otherwise.
struct ELU {
    static constexpr const char* name = "elu";
    // From z, not from y: e^z = y + 1 loses e^z's relative accuracy as y approaches -1 (z << 0), where
    // rounding y + 1 leaves a few bits of it.
    static constexpr bool derivative_from_output = false;
    template <class V>
    static V value(V z) { return simd::select(z > V(0), z, detail::expm1(z)); }
    // f' = 1 for z > 0, e^z otherwise
    template <class V>
    static V pullback(V dy, V z) { return simd::select(z > V(0), dy, dy * simd::exp(z)); }
    // z > 0: f' = 1, f'' = f''' = 0; otherwise f' = f'' = f''' = e^z
    template <class V>
    static Jet<V> jet(V z) {
        const auto pos = z > V(0);
        const V e = simd::exp(simd::min(z, V(0))), d = simd::select(pos, V(0), e);
        return {simd::select(pos, z, detail::expm1(z)), simd::select(pos, V(1), e), d, d};
    }
};

// LeakyReLU with slope Num / Den for z < 0 (PyTorch's nn.LeakyReLU(Num / Den)); the default 1/100 is
// PyTorch's default 0.01. A ratio of integers rather than a floating-point template argument, so that the
// slope is exact in the type's name and in the checkpoint text ("leaky_relu(1/100)"). The slope must be
// positive, so that the sign of the output tells the branch and the pullback needs only y.
template <std::intmax_t Num = 1, std::intmax_t Den = 100>
struct LeakyReLU {
    static_assert(Num > 0 && Den > 0, "LeakyReLU<Num, Den>: the slope Num / Den must be positive");
    static constexpr double slope = static_cast<double>(Num) / static_cast<double>(Den);
    static constexpr std::array<char, 64> name_text = detail::ratio_name("leaky_relu(", Num, Den);
    static constexpr const char* name = name_text.data();
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
    // f' = 1 or the slope, f'' = f''' = 0 (piecewise linear)
    template <class V>
    static Jet<V> jet(V z) { return output_jet(value(z)); }
    template <class V>
    static Jet<V> output_jet(V y) {
        using T = simd::scalar_t<V>;
        return {y, simd::select(y > V(0), V(1), V(static_cast<T>(slope))), V(0), V(0)};
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
    // With q = s (1 - s) = s', s'' = q (1 - 2s), s''' = q (1 - 6s + 6s^2):
    // f' = s + z q,  f'' = 2 q + z s'',  f''' = 3 s'' + z s'''
    template <class V>
    static Jet<V> jet(V z) {
        const V s = V(1) / (V(1) + simd::exp(-z)), q = s - s * s;
        const V s2 = q * simd::fma(V(-2), s, V(1)), s3 = q * simd::fma(V(6) * s, s - V(1), V(1));
        return {z * s, simd::fma(z, q, s), simd::fma(z, s2, V(2) * q), simd::fma(z, s3, V(3) * s2)};
    }
};
using Swish = SiLU;

// Sin<Num, Den>: sin(omega z) with omega = Num / Den (SIREN networks: Sin<30> in the first layer, Sin<1>
// after it). A ratio of integers, as LeakyReLU's slope, so that omega is exact in the type's name and in
// the checkpoint text ("sin(30/1)"). PyTorch: torch.sin(omega * z).
template <std::intmax_t Num = 1, std::intmax_t Den = 1>
struct Sin {
    static_assert(Num > 0 && Den > 0, "Sin<Num, Den>: the frequency Num / Den must be positive");
    static constexpr double omega = static_cast<double>(Num) / static_cast<double>(Den);
    static constexpr std::array<char, 64> name_text = detail::ratio_name("sin(", Num, Den);
    static constexpr const char* name = name_text.data();
    static constexpr bool derivative_from_output = false;
    static constexpr bool fuse_into_product = false;  // (fuses_into_product, above)
    template <class V>
    static V value(V z) {
        using T = simd::scalar_t<V>;
        return simd::sin(V(static_cast<T>(omega)) * z);
    }
    // f' = omega cos(omega z)
    template <class V>
    static V pullback(V dy, V z) {
        using T = simd::scalar_t<V>;
        const V w(static_cast<T>(omega));
        return dy * w * simd::cos(w * z);
    }
    // f'' = -omega^2 sin(omega z),  f''' = -omega^3 cos(omega z)
    template <class V>
    static Jet<V> jet(V z) {
        using T = simd::scalar_t<V>;
        const V w(static_cast<T>(omega)), s = simd::sin(w * z), c = simd::cos(w * z), ww = w * w;
        return {s, w * c, -(ww * s), -(ww * w * c)};
    }
};

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
    // phi' = -z phi: f' = Phi + z phi,  f'' = phi (2 - z^2),  f''' = z phi (z^2 - 4)
    template <class V>
    static Jet<V> jet(V z) {
        using T = simd::scalar_t<V>;
        const V phi = V(T(0.39894228040143267794)) * simd::exp(V(T(-0.5)) * z * z), Phi = cdf(z), zz = z * z;
        return {z * Phi, simd::fma(z, phi, Phi), phi * (V(2) - zz), z * phi * (zz - V(4))};
    }
};

}  // namespace chainlet
