// Run-time size checks shared by the entry points (train.hpp, pullback.hpp) and the file formats
// (io/checkpoint.hpp, io/safetensors.hpp): each throws std::invalid_argument saying what was expected
// and what was given.
#pragma once

#include <cstddef>
#include <ranges>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace chainlet::detail {

inline void expect_size(const char* where, const char* what, std::size_t expected, std::size_t given) {
    if (expected != given)
        throw std::invalid_argument(std::string(where) + ": " + what + " has " + std::to_string(given) +
                                    " elements, expected " + std::to_string(expected));
}

// Number of samples in x, which must be a positive whole number of rows of `row` values.
inline std::size_t count_rows(const char* where, std::size_t size, std::size_t row) {
    if (size == 0 || size % row != 0)
        throw std::invalid_argument(std::string(where) + ": the input has " + std::to_string(size) +
                                    " values, expected a positive multiple of " + std::to_string(row) +
                                    " (the input size of one sample)");
    return size / row;
}

template <class R>
using value_t = std::remove_cvref_t<std::ranges::range_value_t<R>>;

}  // namespace chainlet::detail
