// The fp32 fused multiply-add peak of this machine, measured: every thread runs independent chains of
// vector FMAs, enough to cover the FMA latency (4 cycles on 2 pipes needs 8), so the only limit is FMA
// throughput. 16 chains with 32 vector registers (AVX-512), 10 with 16 (AVX2): 16 chains and their two
// operands do not fit 16 registers, and the spills read 57 instead of 98 GFLOP/s on a Zen 3 core,
// which overstated every "% of peak" on such a machine by 1.7 times. The benchmarks state achieved
// GFLOP/s as a fraction of this figure.
// The best of several short repeats is kept: a repeat that shares a core with a neighbour's burst
// reads low (once 116 instead of 230 GFLOP/s on 2 threads), and a peak is a best case by definition.
#pragma once

#include <chrono>

#include "chainlet/kernels/simd.hpp"
#include "chainlet/parallel.hpp"

namespace bench {

inline double fma_peak_once(int threads, long iterations) {
    using V = chainlet::simd::vec<float>;
    constexpr int chains = chainlet::simd::vector_registers >= 32 ? 16 : 10;
    const auto t0 = std::chrono::steady_clock::now();
    float sink = 0;
    chainlet::parallel_for(static_cast<std::size_t>(threads), threads, [&](std::size_t t, int) {
        V acc[chains];
        for (int c = 0; c < chains; ++c) acc[c] = V(1.0f + 0.001f * static_cast<float>(c + static_cast<int>(t)));
        const V a(0.999999f), b(1e-7f);
        for (long i = 0; i < iterations / threads; ++i)
            for (int c = 0; c < chains; ++c) acc[c] = chainlet::simd::fma(acc[c], a, b);
        V s(0.0f);
        for (int c = 0; c < chains; ++c) s += acc[c];
        const float r = chainlet::simd::hsum<float>(s);
#pragma omp atomic
        sink += r;
    });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile float keep = sink;
    (void)keep;
    return 2.0 * chains * static_cast<double>(chainlet::simd::width<float>) *
           static_cast<double>(iterations / threads * threads) / secs / 1e9;
}

inline double fma_peak_gflops(int threads, long iterations = 20'000'000, int repeats = 5) {
    double best = 0;
    for (int r = 0; r < repeats; ++r) {
        const double g = fma_peak_once(threads, iterations);
        best = g > best ? g : best;
    }
    return best;
}

}  // namespace bench
