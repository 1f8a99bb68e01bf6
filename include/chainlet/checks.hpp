// Run-time size checks shared by the entry points (train.hpp, pullback.hpp, derivatives/) and the file formats
// (io/checkpoint.hpp, io/safetensors.hpp): each throws std::invalid_argument saying what was expected
// and what was given.
#pragma once

#include <cstddef>
#include <ranges>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace chainlet::detail {

// The tests are inlined and the messages built out of line: inlined whole, GCC kept count_rows a call
// of its own whose two divisions by the row size (a constant at every call site) were a measurable part
// of a one-sample forward + pullback.
[[noreturn, gnu::cold, gnu::noinline]] inline void wrong_size(const char* where, const char* what, std::size_t expected,
                                                              std::size_t given) {
    throw std::invalid_argument(std::string(where) + ": " + what + " has " + std::to_string(given) +
                                " elements, expected " + std::to_string(expected));
}
[[noreturn, gnu::cold, gnu::noinline]] inline void wrong_rows(const char* where, std::size_t size, std::size_t row) {
    throw std::invalid_argument(std::string(where) + ": the input has " + std::to_string(size) +
                                " values, expected a positive multiple of " + std::to_string(row) +
                                " (the input size of one sample)");
}

[[gnu::always_inline]] inline void expect_size(const char* where, const char* what, std::size_t expected,
                                               std::size_t given) {
    if (expected != given) wrong_size(where, what, expected, given);
}

// Number of samples in x, which must be a positive whole number of rows of `row` values.
[[gnu::always_inline]] inline std::size_t count_rows(const char* where, std::size_t size, std::size_t row) {
    if (size == 0 || size % row != 0) wrong_rows(where, size, row);
    return size / row;
}

inline void check_threads(const char* where, int threads) {
    if (threads < 0)
        throw std::invalid_argument(std::string(where) + ": threads is " + std::to_string(threads) +
                                    ", expected 0 (all cores) or a positive count");
}

template <class R>
using value_t = std::remove_cvref_t<std::ranges::range_value_t<R>>;

}  // namespace chainlet::detail
