// Buffers aligned to a cache line (64 bytes, also one AVX-512 register), so that a chunk's rows start
// on a line and vector loads of aligned offsets never split.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace chainlet {

template <class T>
struct AlignedAllocator {
    using value_type = T;
    static constexpr std::align_val_t alignment{64};
    AlignedAllocator() = default;
    template <class U>
    AlignedAllocator(const AlignedAllocator<U>&) noexcept {}
    T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), alignment)); }
    void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, alignment); }
    template <class U>
    bool operator==(const AlignedAllocator<U>&) const noexcept { return true; }
};

template <class T>
using aligned_vector = std::vector<T, AlignedAllocator<T>>;

// Rounds n up to a multiple of 16 elements so consecutive buffers carved from one allocation stay aligned.
constexpr std::size_t round_up16(std::size_t n) { return (n + 15) / 16 * 16; }

}  // namespace chainlet
