// A small, portable random number generator: the same seed gives the same numbers with every
// compiler and standard library (std::normal_distribution does not promise that), which the
// bit-for-bit reproducibility of initialisation and shuffling relies on.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace chainlet {

__extension__ using uint128 = unsigned __int128;  // __extension__: no -Wpedantic warning

// xoshiro256** seeded through splitmix64 (Blackman & Vigna).
class Rng {
public:
    explicit Rng(std::uint64_t seed) {
        for (auto& w : s_) w = splitmix(seed);
    }
    std::uint64_t next() {
        const std::uint64_t r = rotl(s_[1] * 5, 7) * 9;
        const std::uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return r;
    }
    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; the bias is below 2^-32 for n < 2^32).
    std::uint64_t below(std::uint64_t n) {
        return static_cast<std::uint64_t>((static_cast<uint128>(next()) * n) >> 64);
    }
    // Standard normal by Box-Muller.
    double normal() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        const double u1 = 1.0 - uniform();  // (0, 1]
        const double u2 = uniform();
        const double r = std::sqrt(-2.0 * std::log(u1));
        spare_ = r * std::sin(2 * std::numbers::pi * u2);
        has_spare_ = true;
        return r * std::cos(2 * std::numbers::pi * u2);
    }

private:
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    static std::uint64_t splitmix(std::uint64_t& x) {
        std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    std::uint64_t s_[4];
    double spare_ = 0;
    bool has_spare_ = false;
};

// A counter-based generator (splitmix64 evaluated at an arbitrary position): the counter-th output of
// the splitmix64 sequence that starts from state `key`. Random draws keyed by what they are for (e.g.
// Dropout's (seed, stream, step, sample, feature)) need no state, so they come out the same on any
// thread count and in any order.
inline std::uint64_t mix64(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
inline std::uint64_t counter_hash(std::uint64_t key, std::uint64_t counter) {
    return mix64(key + (counter + 1) * 0x9E3779B97F4A7C15ull);
}

}  // namespace chainlet
