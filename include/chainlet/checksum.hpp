// FNV-1a, 64 bit, over bytes in memory (no I/O): the fingerprint the examples print for their final
// parameters and the MPI ranks compare (two runs agree bit for bit exactly when their checksums agree,
// up to a 2^-64 chance); checkpoints also hash their architecture text with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace chainlet {

inline std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t h = 0xcbf29ce484222325ull) {
    for (std::byte b : bytes) {
        h ^= static_cast<std::uint64_t>(b);
        h *= 0x100000001b3ull;
    }
    return h;
}

template <class T>
std::uint64_t checksum(std::span<const T> values) {
    return fnv1a(std::as_bytes(values));
}

}  // namespace chainlet
