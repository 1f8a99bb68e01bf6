// safetensors export and import, with the tensor names, shapes and layouts of the PyTorch nn.Sequential
// of the same architecture (see chainlet/io/architecture.hpp for the mapping): a chainlet model can be
// loaded into PyTorch with model.load_state_dict(...) and back.
//
// File: u64 little-endian header length N, N bytes of JSON
//   {"<name>": {"dtype": "F32"|"F64", "shape": [...], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"format": "pt", "chainlet.architecture": "<architecture<Net>::text()>"}}
// (padded with spaces to a multiple of 8), then the tensor data, offsets relative to its start.
//
// Import checks everything (JSON syntax, offsets in range and consistent with dtype and shape, every
// expected tensor present with the expected shape, no unexpected tensor) and reports problems as
// SafetensorsError naming the file. F32 and F64 tensors are both accepted and converted to the chain's
// element type.
//
// The input of the PyTorch model is chainlet's input in PyTorch's layout: an (H, W, C) image sample
// becomes (C, H, W).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "chainlet/checks.hpp"
#include "chainlet/io/architecture.hpp"
#include "chainlet/io/file.hpp"

namespace chainlet {

struct SafetensorsError : IoError {
    using IoError::IoError;
};

struct SafeTensor {
    std::string name;
    std::string dtype;                    // "F32", "F64", "I32", ... as in the file
    std::vector<std::uint64_t> shape;
    std::span<const std::byte> data;      // little-endian values, row-major
};

// A parsed file: the tensors (in the order of their data) point into bytes.
// Move-only: the tensors' spans point into bytes.
struct Safetensors {
    Safetensors() = default;
    Safetensors(Safetensors&&) = default;
    Safetensors& operator=(Safetensors&&) = default;
    Safetensors(const Safetensors&) = delete;
    Safetensors& operator=(const Safetensors&) = delete;

    std::vector<std::byte> bytes;
    std::vector<SafeTensor> tensors;
    std::vector<std::pair<std::string, std::string>> metadata;

    const SafeTensor* find(const std::string& name) const {
        for (const auto& t : tensors)
            if (t.name == name) return &t;
        return nullptr;
    }
    // The tensor's values converted to T (F32 or F64 only).
    template <class T>
    std::vector<T> values(const std::string& name) const;
};

// Parses and validates a safetensors buffer (taking ownership); source names it in error messages.
Safetensors parse_safetensors(std::vector<std::byte> bytes, const std::string& source);
Safetensors read_safetensors(const std::string& path);

// Encodes tensors (data in the given dtype's little-endian layout) and metadata as a safetensors file.
std::vector<std::byte> encode_safetensors(const std::vector<SafeTensor>& tensors,
                                          const std::vector<std::pair<std::string, std::string>>& metadata);
void write_safetensors(const std::string& path, const std::vector<SafeTensor>& tensors,
                       const std::vector<std::pair<std::string, std::string>>& metadata = {});

namespace detail {
[[noreturn]] void safetensors_fail(const std::string& source, const std::string& what);
std::string shape_text(const std::vector<std::uint64_t>& shape);
template <class T>
constexpr const char* safetensors_dtype() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "safetensors export holds float or double");
    return std::is_same_v<T, float> ? "F32" : "F64";
}
template <class T>
std::vector<T> convert(const SafeTensor& t, const std::string& source) {
    const std::size_t n = t.data.size() / (t.dtype == "F32" ? 4 : 8);
    std::vector<T> out(n);
    if (t.dtype == "F32") {
        for (std::size_t i = 0; i < n; ++i) {
            float f;
            std::memcpy(&f, t.data.data() + 4 * i, 4);
            out[i] = static_cast<T>(f);
        }
    } else if (t.dtype == "F64") {
        for (std::size_t i = 0; i < n; ++i) {
            double d;
            std::memcpy(&d, t.data.data() + 8 * i, 8);
            out[i] = static_cast<T>(d);
        }
    } else {
        safetensors_fail(source, "tensor \"" + t.name + "\" has dtype " + t.dtype + ", expected F32 or F64");
    }
    return out;
}
}  // namespace detail

template <class T>
std::vector<T> Safetensors::values(const std::string& name) const {
    const SafeTensor* t = find(name);
    if (!t) detail::safetensors_fail("safetensors", "no tensor \"" + name + "\"");
    return detail::convert<T>(*t, "safetensors");
}

// The safetensors bytes of parameters p in PyTorch's names, shapes and layouts.
template <class Net, std::ranges::contiguous_range P>
std::vector<std::byte> safetensors_bytes(const P& p) {
    using T = detail::value_t<P>;
    detail::expect_size("export_safetensors", "the parameter buffer", Net::num_params, std::ranges::size(p));
    const T* src = std::ranges::data(p);
    const auto layout = architecture<Net>::torch_tensors();
    std::vector<std::vector<T>> values;
    std::vector<SafeTensor> tensors;
    for (const auto& t : layout) {
        auto& v = values.emplace_back(t.source.size());
        for (std::size_t k = 0; k < v.size(); ++k) v[k] = src[t.source[k]];
        tensors.push_back({t.name, detail::safetensors_dtype<T>(), t.shape, std::as_bytes(std::span<const T>(v))});
    }
    return encode_safetensors(tensors, {{"format", "pt"}, {"chainlet.architecture", architecture<Net>::text()}});
}

template <class Net, std::ranges::contiguous_range P>
void export_safetensors(const std::string& path, const P& p) {
    detail::write_file_atomically(path, safetensors_bytes<Net>(p));
}

// Fills p from a parsed safetensors file holding exactly the tensors of Net's nn.Sequential; nothing is
// written unless every tensor is present and valid.
template <class Net, std::ranges::contiguous_range P>
void import_safetensors(const Safetensors& file, const std::string& source, P&& p) {
    using T = detail::value_t<P>;
    detail::expect_size("import_safetensors", "the parameter buffer", Net::num_params, std::ranges::size(p));
    const auto layout = architecture<Net>::torch_tensors();
    std::vector<T> staged(Net::num_params);
    for (const auto& want : layout) {
        const SafeTensor* t = file.find(want.name);
        if (!t)
            detail::safetensors_fail(source, "tensor \"" + want.name + "\" " + detail::shape_text(want.shape) +
                                                 " is missing (chain: " + architecture<Net>::text() + ")");
        if (t->shape != want.shape)
            detail::safetensors_fail(source, "tensor \"" + want.name + "\" has shape " + detail::shape_text(t->shape) +
                                                 ", expected " + detail::shape_text(want.shape) +
                                                 " (chain: " + architecture<Net>::text() + ")");
        const auto v = detail::convert<T>(*t, source);
        for (std::size_t k = 0; k < v.size(); ++k) staged[want.source[k]] = v[k];
    }
    for (const auto& t : file.tensors) {
        bool known = false;
        for (const auto& want : layout) known = known || want.name == t.name;
        if (!known)
            detail::safetensors_fail(source, "unexpected tensor \"" + t.name + "\" (chain: " +
                                                 architecture<Net>::text() + ")");
    }
    std::memcpy(std::ranges::data(p), staged.data(), staged.size() * sizeof(T));
}

template <class Net, std::ranges::contiguous_range P>
void import_safetensors_bytes(std::span<const std::byte> bytes, const std::string& source, P&& p) {
    import_safetensors<Net>(parse_safetensors(std::vector<std::byte>(bytes.begin(), bytes.end()), source), source, p);
}

template <class Net, std::ranges::contiguous_range P>
void import_safetensors(const std::string& path, P&& p) {
    import_safetensors<Net>(read_safetensors(path), path, p);
}

}  // namespace chainlet
