// A convolution straight from the definition, for the Conv tests (conv_gradient_check.hpp,
// test_conv_one_sample.cpp).
#pragma once

#include <cstddef>
#include <vector>

namespace test {

// Plain convolution straight from the definition, on sample-major-free indexing of a feature-major chunk.
template <class L, std::size_t H, std::size_t W, std::size_t C, std::size_t KH, std::size_t KW, std::size_t OC, class Act>
std::vector<double> reference_forward(const std::vector<double>& p, const std::vector<double>& x, std::size_t n) {
    std::vector<double> y(L::out_size * n);
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t oy = 0; oy < L::OH; ++oy)
            for (std::size_t ox = 0; ox < L::OW; ++ox)
                for (std::size_t oc = 0; oc < OC; ++oc) {
                    double z = p[L::num_weights + oc];
                    for (std::size_t ky = 0; ky < KH; ++ky)
                        for (std::size_t kx = 0; kx < KW; ++kx)
                            for (std::size_t c = 0; c < C; ++c) {
                                const long iy = static_cast<long>(oy + ky) - static_cast<long>(L::pad_top);
                                const long ix = static_cast<long>(ox + kx) - static_cast<long>(L::pad_left);
                                if (iy < 0 || ix < 0 || iy >= static_cast<long>(H) || ix >= static_cast<long>(W)) continue;
                                z += p[((ky * KW + kx) * C + c) * OC + oc] *
                                     x[((static_cast<std::size_t>(iy) * W + static_cast<std::size_t>(ix)) * C + c) * n + s];
                            }
                    y[((oy * L::OW + ox) * OC + oc) * n + s] = Act::value(z);
                }
    return y;
}

}  // namespace test
