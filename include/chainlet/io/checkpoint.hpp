// Checkpoints: a chain's parameters, and optionally its optimiser's state (Adam/AdamW moments and step
// count, SGD velocity, or any optimiser's state_bytes(), such as L-BFGS's history), in a versioned little-endian binary file whose header names the element type
// and the chain's architecture (chainlet::architecture<Net>::text()) and which ends in a CRC-32 of
// everything before it. The byte layout and the versioning policy are in docs/checkpoints.md.
//
//   save_checkpoint<Net>("model.ckpt", params);            save_checkpoint<Net>("model.ckpt", params, adam);
//   load_checkpoint<Net>("model.ckpt", params);            load_checkpoint<Net>("model.ckpt", params, adam);
//
// Saving is atomic: the bytes go to "<path>.tmp-<pid>", are fsynced, and the file is renamed over path,
// so a failed or interrupted save leaves the previous checkpoint intact. Loading checks everything
// (magic, version, checksum, element type, architecture, sizes) before it writes into the caller's
// buffers, and reports any problem as CheckpointError naming the file. The *_bytes variants work on a
// buffer in memory.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "chainlet/checks.hpp"
#include "chainlet/io/architecture.hpp"
#include "chainlet/io/file.hpp"
#include "chainlet/optim/adam.hpp"
#include "chainlet/optim/sgd.hpp"

namespace chainlet {

static_assert(std::endian::native == std::endian::little,
              "chainlet's checkpoint and safetensors files store raw little-endian values");

struct CheckpointError : IoError {
    using IoError::IoError;
};

enum class ElementType : std::uint32_t { f32 = 1, f64 = 2 };

template <class T>
constexpr ElementType element_type_of() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "checkpoints hold float or double values");
    return std::is_same_v<T, float> ? ElementType::f32 : ElementType::f64;
}

namespace detail {

inline constexpr std::uint32_t checkpoint_version = 1;
enum class SectionKind : std::uint32_t { params = 1, adam = 2, sgd = 3, optimizer = 4 };

struct CheckpointSection {
    SectionKind kind;
    std::span<const std::byte> data;
};

// A checkpoint whose structure and checksum were verified; the spans point into the parsed buffer.
struct CheckpointView {
    std::uint32_t version = 0;
    ElementType type = ElementType::f32;
    std::uint64_t num_params = 0;
    std::string architecture;
    std::vector<CheckpointSection> sections;
};

std::vector<std::byte> encode_checkpoint(ElementType type, std::uint64_t num_params, const std::string& architecture,
                                         const std::vector<CheckpointSection>& sections);
// Checks magic, version, lengths and checksum; source names the file in error messages.
CheckpointView parse_checkpoint(std::span<const std::byte> bytes, const std::string& source);
// Checks that the file holds `type` values for `architecture` with num_params parameters.
void check_checkpoint(const CheckpointView& view, const std::string& source, ElementType type,
                      std::uint64_t num_params, const std::string& architecture);
// The section of that kind, or nullptr.
const CheckpointSection* find_section(const CheckpointView& view, SectionKind kind);
[[noreturn]] void checkpoint_fail(const std::string& source, const std::string& what);

template <class T>
void append_values(std::vector<std::byte>& out, std::span<const T> v) {
    const auto b = std::as_bytes(v);
    out.insert(out.end(), b.begin(), b.end());
}
inline void append_u64(std::vector<std::byte>& out, std::uint64_t x) {
    append_values(out, std::span<const std::uint64_t>(&x, 1));
}

// An optimiser of the user's (or L-BFGS) that a checkpoint can hold: a name that identifies its kind
// and settings, its state as bytes, and a load_state that checks them (std::invalid_argument).
template <class Opt>
concept SerializableOptimizer = requires(const Opt& c, Opt& o, std::span<const std::byte> b) {
    { c.state_name() } -> std::convertible_to<std::string>;
    { c.state_bytes() } -> std::same_as<std::vector<std::byte>>;
    o.load_state(b);
};

// Optimiser state as section bytes, and back. Adam: u64 steps, u64 count (0 or num_params), m, v.
// SGD: u64 count, velocity.
template <class T>
std::vector<std::byte> optimizer_bytes(const AdamW<T>& opt) {
    std::vector<std::byte> out;
    append_u64(out, opt.steps());
    append_u64(out, opt.first_moment().size());
    append_values(out, opt.first_moment());
    append_values(out, opt.second_moment());
    return out;
}
template <class T>
std::vector<std::byte> optimizer_bytes(const SGD<T>& opt) {
    std::vector<std::byte> out;
    append_u64(out, opt.velocity().size());
    append_values(out, opt.velocity());
    return out;
}
template <class Opt>
inline constexpr bool builtin_optimizer =
    std::is_base_of_v<AdamW<float>, Opt> || std::is_base_of_v<AdamW<double>, Opt> || std::is_base_of_v<SGD<float>, Opt> ||
    std::is_base_of_v<SGD<double>, Opt>;
// Any other optimiser: u64 name length, its state_name(), then its state_bytes().
template <class Opt>
    requires(!builtin_optimizer<Opt>)
std::vector<std::byte> optimizer_bytes(const Opt& opt) {
    static_assert(SerializableOptimizer<Opt>,
                  "checkpoints save Adam, AdamW, SGD, or an optimiser with state_name(), state_bytes() and "
                  "load_state(bytes) (docs/api.md, \"Optimisers\")");
    const std::string name = opt.state_name();
    std::vector<std::byte> out;
    append_u64(out, name.size());
    append_values(out, std::as_bytes(std::span<const char>(name.data(), name.size())));
    const std::vector<std::byte> state = opt.state_bytes();
    out.insert(out.end(), state.begin(), state.end());
    return out;
}
template <class T>
constexpr SectionKind optimizer_kind(const AdamW<T>*) { return SectionKind::adam; }
template <class T>
constexpr SectionKind optimizer_kind(const SGD<T>*) { return SectionKind::sgd; }
constexpr SectionKind optimizer_kind(const void*) { return SectionKind::optimizer; }
inline const char* section_name(SectionKind k) {
    return k == SectionKind::adam        ? "Adam/AdamW"
           : k == SectionKind::sgd       ? "SGD"
           : k == SectionKind::optimizer ? "optimiser"
                                         : "parameter";
}

// Reads `count` values from bytes at pos after checking the section is long enough.
template <class T>
std::vector<T> read_values(std::span<const std::byte> bytes, std::size_t& pos, std::uint64_t count,
                           const std::string& source, const char* what) {
    if (count > (bytes.size() - pos) / sizeof(T))
        checkpoint_fail(source, std::string(what) + ": needs " + std::to_string(count) + " values, only " +
                                    std::to_string((bytes.size() - pos) / sizeof(T)) + " are stored");
    std::vector<T> v(static_cast<std::size_t>(count));
    if (count) std::memcpy(v.data(), bytes.data() + pos, v.size() * sizeof(T));
    pos += v.size() * sizeof(T);
    return v;
}

template <class T, class Opt>
void restore_optimizer(const CheckpointView& view, const std::string& source, std::uint64_t num_params, Opt& opt) {
    constexpr SectionKind kind = optimizer_kind(static_cast<const Opt*>(nullptr));
    const CheckpointSection* s = find_section(view, kind);
    if (!s) {
        std::string has;
        for (const auto& e : view.sections)
            if (e.kind != SectionKind::params) has += std::string(has.empty() ? "" : ", ") + section_name(e.kind);
        checkpoint_fail(source, std::string("no ") + section_name(kind) + " optimiser state to load (the file holds " +
                                    (has.empty() ? "parameters only" : "state for " + has) + ")");
    }
    std::size_t pos = 0;
    auto u64 = [&](const char* what) { return read_values<std::uint64_t>(s->data, pos, 1, source, what)[0]; };
    if constexpr (kind == SectionKind::optimizer) {
        const std::uint64_t length = u64("optimiser name length");
        const auto name = read_values<char>(s->data, pos, length, source, "optimiser name");
        const std::string stored(name.begin(), name.end()), expected = opt.state_name();
        if (stored != expected)
            checkpoint_fail(source, "the optimiser state is " + stored + "'s, loading it into " + expected);
        try {
            // an optimiser that can check its state against the chain's size is given it
            if constexpr (requires { opt.load_state(s->data.subspan(pos), std::size_t(num_params)); })
                opt.load_state(s->data.subspan(pos), static_cast<std::size_t>(num_params));
            else
                opt.load_state(s->data.subspan(pos));
        } catch (const std::invalid_argument& e) {
            checkpoint_fail(source, std::string("the ") + expected + " state: " + e.what());
        }
        return;
    }
    const std::uint64_t steps = kind == SectionKind::adam ? u64("Adam step count") : 0;
    const std::uint64_t count = u64("optimiser state size");
    if (count != 0 && count != num_params)
        checkpoint_fail(source, "the optimiser state has " + std::to_string(count) + " values per buffer, expected " +
                                    std::to_string(num_params) + " (or 0)");
    const auto first = read_values<T>(s->data, pos, count, source, "optimiser state");
    if constexpr (kind == SectionKind::adam) {
        const auto second = read_values<T>(s->data, pos, count, source, "Adam second moments");
        if (pos != s->data.size()) checkpoint_fail(source, "the Adam state section has trailing bytes");
        opt.set_state(first, second, static_cast<std::size_t>(steps));
    } else if constexpr (kind == SectionKind::sgd) {
        if (pos != s->data.size()) checkpoint_fail(source, "the SGD state section has trailing bytes");
        opt.set_velocity(first);
    }
}

}  // namespace detail

// The checkpoint file's bytes for parameters p (and optionally an optimiser's state).
template <class Net, std::ranges::contiguous_range P, class... Opt>
std::vector<std::byte> checkpoint_bytes(const P& p, const Opt&... opt) {
    static_assert(sizeof...(Opt) <= 1, "checkpoint_bytes: at most one optimiser");
    using T = detail::value_t<P>;
    detail::expect_size("save_checkpoint", "the parameter buffer", Net::num_params, std::ranges::size(p));
    std::vector<detail::CheckpointSection> sections{
        {detail::SectionKind::params, std::as_bytes(std::span<const T>(std::ranges::data(p), Net::num_params))}};
    std::vector<std::byte> state;
    if constexpr (sizeof...(Opt) == 1) {
        (
            [&] {
                state = detail::optimizer_bytes(opt);
                sections.push_back({detail::optimizer_kind(&opt), state});
            }(),
            ...);
    }
    return detail::encode_checkpoint(element_type_of<T>(), Net::num_params, architecture<Net>::text(), sections);
}

// Writes the checkpoint atomically (see the top of this file).
template <class Net, std::ranges::contiguous_range P, class... Opt>
void save_checkpoint(const std::string& path, const P& p, const Opt&... opt) {
    const auto bytes = checkpoint_bytes<Net>(p, opt...);
    detail::write_file_atomically(path, bytes);
}

// Loads parameters (and the optimiser's state, if one is given) from a checkpoint in memory; source
// names it in error messages. Nothing is written unless the whole checkpoint is valid for Net and T.
template <class Net, std::ranges::contiguous_range P, class... Opt>
void load_checkpoint_bytes(std::span<const std::byte> bytes, const std::string& source, P&& p, Opt&... opt) {
    static_assert(sizeof...(Opt) <= 1, "load_checkpoint: at most one optimiser");
    using T = detail::value_t<P>;
    detail::expect_size("load_checkpoint", "the parameter buffer", Net::num_params, std::ranges::size(p));
    const auto view = detail::parse_checkpoint(bytes, source);
    detail::check_checkpoint(view, source, element_type_of<T>(), Net::num_params, architecture<Net>::text());
    const auto* params = detail::find_section(view, detail::SectionKind::params);
    // check_checkpoint guarantees the parameter section exists with num_params values.
    if constexpr (sizeof...(Opt) == 1) (detail::restore_optimizer<T>(view, source, Net::num_params, opt), ...);
    std::memcpy(std::ranges::data(p), params->data.data(), Net::num_params * sizeof(T));
}

template <class Net, std::ranges::contiguous_range P, class... Opt>
void load_checkpoint(const std::string& path, P&& p, Opt&... opt) {
    const auto bytes = detail::read_whole_file(path);
    load_checkpoint_bytes<Net>(bytes, path, p, opt...);
}

}  // namespace chainlet
