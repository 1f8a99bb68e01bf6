// Buffers aligned to a cache line (64 bytes, also one AVX-512 register), so that a chunk's rows start
// on a line and vector loads of aligned offsets never split; large ones on transparent huge pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <vector>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace chainlet {

// The size of a transparent huge page on x86-64 Linux.
inline constexpr std::size_t huge_page_bytes = std::size_t(2) << 20;

// Asks the kernel to back the whole 2 MiB pages inside [p, p + bytes) with transparent huge pages
// (madvise MADV_HUGEPAGE), best before they are first written: on a system whose THP setting is
// "madvise" (cat /sys/kernel/mm/transparent_hugepage/enabled), memory is otherwise mapped in 4 KiB pages.
// Reading a data set through 4 KiB pages costs a TLB miss and a page walk every 4 KiB, and in a virtual
// machine a walk goes through two page tables (the likely cause; no counters confirmed it): a LeNet5
// epoch read its data set about a fifth faster from huge pages on a cloud VM (docs/profile.md). Returns
// whether the kernel took the advice; false where there is no
// such call, and for a range holding no whole huge page. The contents are unchanged either way.
// chainlet's own buffers (aligned_vector) take it from 2 MiB on; call it for a large data set held
// elsewhere.
inline bool advise_huge_pages(void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const auto begin = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t first = (begin + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    const std::uintptr_t last = (begin + bytes) / huge_page_bytes * huge_page_bytes;
    if (bytes < huge_page_bytes || last <= first) return false;
    return ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE) == 0;
#else
    (void)p;
    (void)bytes;
    return false;
#endif
}

// 64-byte aligned; from huge_page_bytes on, aligned to a huge page, its size rounded up to whole huge
// pages (at most 2 MiB more address space, which the kernel maps when it is touched) and advised for
// huge pages (advise_huge_pages), so that a workspace, an optimiser's state or a data set held in an
// aligned_vector is read through few TLB entries.
template <class T>
struct AlignedAllocator {
    using value_type = T;
    static constexpr std::align_val_t alignment{64};
    static constexpr std::align_val_t huge_alignment{huge_page_bytes};
    AlignedAllocator() = default;
    template <class U>
    AlignedAllocator(const AlignedAllocator<U>&) noexcept {}
    static constexpr bool on_huge_pages(std::size_t n) { return n * sizeof(T) >= huge_page_bytes; }
    static constexpr std::size_t rounded_bytes(std::size_t n) {
        return (n * sizeof(T) + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    }
    T* allocate(std::size_t n) {
        // at most PTRDIFF_MAX bytes once rounded up, the bound of every object
        constexpr std::size_t max_n =
            (static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) - huge_page_bytes) / sizeof(T);
        if (n > max_n) throw std::bad_array_new_length();
        if (!on_huge_pages(n)) return static_cast<T*>(::operator new(n * sizeof(T), alignment));
        void* p = ::operator new(rounded_bytes(n), huge_alignment);
        advise_huge_pages(p, rounded_bytes(n));
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (on_huge_pages(n)) ::operator delete(p, huge_alignment);
        else ::operator delete(p, alignment);
    }
    template <class U>
    bool operator==(const AlignedAllocator<U>&) const noexcept { return true; }
};

template <class T>
using aligned_vector = std::vector<T, AlignedAllocator<T>>;

// Rounds n up to a multiple of 16 elements so consecutive buffers carved from one allocation stay aligned.
constexpr std::size_t round_up16(std::size_t n) { return (n + 15) / 16 * 16; }

}  // namespace chainlet
