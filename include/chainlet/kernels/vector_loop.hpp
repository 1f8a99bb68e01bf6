// The loop shape shared by the element-wise kernels of the pooling layers and the strided convolution:
// one template body run over the full SIMD vectors of a range and then, as a scalar, over its tail.
#pragma once

#include <cstddef>

#include "chainlet/kernels/simd.hpp"

namespace chainlet::kernels {

// Calls body.template operator()<simd::vec<T>>(i) for i = 0, W, 2W, ... while a whole vector fits in
// [0, n), then body.template operator()<T>(i) for each remaining i.
template <class T, class F>
inline void vectors_then_scalars(std::size_t n, F&& body) {
    std::size_t i = 0;
    if constexpr (simd::enabled)
        for (const std::size_t i_end = n - n % simd::width<T>; i < i_end; i += simd::width<T>)
            body.template operator()<simd::vec<T>>(i);
    for (; i < n; ++i) body.template operator()<T>(i);
}

}  // namespace chainlet::kernels
