// Counts every heap allocation of the test program: test::allocations goes up by one per operator new
// (or, under AddressSanitizer, per malloc, through the sanitizer's hook). Replaces the global
// operators, so include it in exactly one translation unit of a test executable.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace test {
inline std::atomic<long> allocations{0};
}

// g++ defines __SANITIZE_ADDRESS__ under AddressSanitizer; clang 14 does not, and says so through
// __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define CHAINLET_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHAINLET_TEST_ASAN 1
#endif
#endif

#if defined(CHAINLET_TEST_ASAN)
// Under AddressSanitizer the global operators belong to the sanitizer; count through its allocation
// hook instead, which sees every malloc and operator new.
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*)(const volatile void*, std::size_t),
                                                        void (*)(const volatile void*));
namespace {
void count_malloc(const volatile void*, std::size_t) { ++test::allocations; }
void count_free(const volatile void*) {}
const int hooks_installed = __sanitizer_install_malloc_and_free_hooks(count_malloc, count_free);
}  // namespace
#else
void* operator new(std::size_t n) {
    ++test::allocations;
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
    ++test::allocations;
    const std::size_t al = static_cast<std::size_t>(a);
    if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
    throw std::bad_alloc();
}
// operator new above takes its memory from malloc, so free is the matching release (GCC cannot see
// that through the replaced operators and warns).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif
