// The checkpoint format (docs/checkpoints.md), version 1, little-endian:
//   "CHAINLET" | u32 version | u32 element type | u64 num_params | u64 FNV-1a of the architecture text |
//   u32 text length | text | u32 section count | sections (u32 kind, u32 reserved, u64 length, bytes) |
//   u32 CRC-32 of everything before it
#include "chainlet/io/checkpoint.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "chainlet/checksum.hpp"

namespace chainlet::detail {

namespace {

constexpr char magic[8] = {'C', 'H', 'A', 'I', 'N', 'L', 'E', 'T'};
// Fixed header before the architecture text: magic, version, type, num_params, hash, text length.
constexpr std::size_t fixed_header = 8 + 4 + 4 + 8 + 8 + 4;
constexpr std::size_t crc_size = 4;

// resize + memcpy rather than vector::insert, on which g++ 12 -O2 raises a false -Wstringop-overflow.
void append(std::vector<std::byte>& out, const void* bytes, std::size_t n) {
    const std::size_t at = out.size();
    out.resize(at + n);
    if (n > 0) std::memcpy(out.data() + at, bytes, n);
}

template <class U>
void put(std::vector<std::byte>& out, U x) {
    append(out, &x, sizeof(U));
}

std::uint32_t crc32_of(std::span<const std::byte> bytes) {
    uLong crc = crc32(0L, Z_NULL, 0);
    const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
    for (std::size_t left = bytes.size(); left > 0;) {
        const uInt chunk = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
        crc = crc32(crc, p, chunk);
        p += chunk;
        left -= chunk;
    }
    return static_cast<std::uint32_t>(crc);
}

std::uint64_t text_hash(const std::string& s) { return fnv1a(std::as_bytes(std::span(s.data(), s.size()))); }

const char* type_name(ElementType t) {
    return t == ElementType::f32 ? "float32" : t == ElementType::f64 ? "float64" : "unknown";
}

// Bounds-checked reader over the file's bytes.
struct Reader {
    std::span<const std::byte> bytes;
    const std::string& source;
    std::size_t pos = 0;

    std::size_t left() const { return bytes.size() - pos; }
    void need(std::size_t n, const std::string& what) const {
        if (n > left())
            checkpoint_fail(source, "truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                                        std::to_string(pos) + ", only " + std::to_string(left()) + " remain");
    }
    template <class U>
    U get(const std::string& what) {
        need(sizeof(U), what);
        U x;
        std::memcpy(&x, bytes.data() + pos, sizeof(U));
        pos += sizeof(U);
        return x;
    }
    std::span<const std::byte> take(std::uint64_t n, const std::string& what) {
        if (n > left()) need(static_cast<std::size_t>(std::min<std::uint64_t>(n, SIZE_MAX)), what);
        auto s = bytes.subspan(pos, static_cast<std::size_t>(n));
        pos += static_cast<std::size_t>(n);
        return s;
    }
};

}  // namespace

void checkpoint_fail(const std::string& source, const std::string& what) {
    throw CheckpointError(source + ": " + what);
}

std::vector<std::byte> encode_checkpoint(ElementType type, std::uint64_t num_params, const std::string& architecture,
                                         const std::vector<CheckpointSection>& sections) {
    std::vector<std::byte> out;
    std::size_t total = fixed_header + architecture.size() + 4 + crc_size;
    for (const auto& s : sections) total += 16 + s.data.size();
    out.reserve(total);
    append(out, magic, sizeof magic);
    put(out, checkpoint_version);
    put(out, static_cast<std::uint32_t>(type));
    put(out, num_params);
    put(out, text_hash(architecture));
    put(out, static_cast<std::uint32_t>(architecture.size()));
    append(out, architecture.data(), architecture.size());
    put(out, static_cast<std::uint32_t>(sections.size()));
    for (const auto& s : sections) {
        put(out, static_cast<std::uint32_t>(s.kind));
        put(out, std::uint32_t{0});
        put(out, static_cast<std::uint64_t>(s.data.size()));
        append(out, s.data.data(), s.data.size());
    }
    put(out, crc32_of(out));
    return out;
}

CheckpointView parse_checkpoint(std::span<const std::byte> bytes, const std::string& source) {
    if (bytes.size() < 8 || std::memcmp(bytes.data(), magic, 8) != 0)
        checkpoint_fail(source, bytes.size() < 8 ? "not a chainlet checkpoint (only " + std::to_string(bytes.size()) +
                                                       " bytes, too short for the header)"
                                                 : "not a chainlet checkpoint (bad magic, expected \"CHAINLET\")");
    Reader r{bytes, source, 8};
    CheckpointView v;
    v.version = r.get<std::uint32_t>("the format version");
    if (v.version == 0 || v.version > checkpoint_version)
        checkpoint_fail(source, "format version " + std::to_string(v.version) + " is not supported (this build reads " +
                                    "versions 1 to " + std::to_string(checkpoint_version) + ")");
    const auto type = r.get<std::uint32_t>("the element type");
    v.type = static_cast<ElementType>(type);
    v.num_params = r.get<std::uint64_t>("the parameter count");
    const auto hash = r.get<std::uint64_t>("the architecture hash");
    const auto text_len = r.get<std::uint32_t>("the architecture text length");
    const auto text = r.take(text_len, "the architecture text");
    v.architecture.assign(reinterpret_cast<const char*>(text.data()), text.size());
    const auto count = r.get<std::uint32_t>("the section count");
    // Each section takes at least 16 bytes: a count larger than the file can hold is damage, not a
    // reason to reserve memory.
    if (count > r.left() / 16)
        checkpoint_fail(source, "truncated or damaged: " + std::to_string(count) + " sections cannot fit in the " +
                                    std::to_string(r.left()) + " remaining bytes");
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::string what = "section " + std::to_string(i + 1) + " of " + std::to_string(count);
        const auto kind = r.get<std::uint32_t>(what + " (header)");
        r.get<std::uint32_t>(what + " (header)");
        const auto len = r.get<std::uint64_t>(what + " (header)");
        v.sections.push_back({static_cast<SectionKind>(kind), r.take(len, what)});
    }
    const std::size_t body = r.pos;
    const auto stored = r.get<std::uint32_t>("the checksum");
    if (r.left() != 0)
        checkpoint_fail(source, std::to_string(r.left()) + " unexpected bytes after the checksum");
    const auto actual = crc32_of(bytes.first(body));
    if (stored != actual)
        checkpoint_fail(source, "checksum mismatch (CRC-32 stored " + std::to_string(stored) + ", computed " +
                                    std::to_string(actual) + "): the file is damaged");
    // Only checked after the checksum, so damage in the header reads as damage.
    if (type != static_cast<std::uint32_t>(ElementType::f32) && type != static_cast<std::uint32_t>(ElementType::f64))
        checkpoint_fail(source, "unknown element type code " + std::to_string(type));
    if (hash != text_hash(v.architecture))
        checkpoint_fail(source, "the architecture hash does not match the architecture text");
    return v;
}

const CheckpointSection* find_section(const CheckpointView& view, SectionKind kind) {
    for (const auto& s : view.sections)
        if (s.kind == kind) return &s;
    return nullptr;
}

void check_checkpoint(const CheckpointView& view, const std::string& source, ElementType type,
                      std::uint64_t num_params, const std::string& architecture) {
    if (view.architecture != architecture)
        checkpoint_fail(source, "architecture mismatch: the chain is \"" + architecture + "\" but the file holds \"" +
                                    view.architecture + "\"");
    if (view.type != type)
        checkpoint_fail(source, std::string("element type mismatch: expected ") + type_name(type) +
                                    " parameters, the file holds " + type_name(view.type));
    if (view.num_params != num_params)
        checkpoint_fail(source, "parameter count mismatch: expected " + std::to_string(num_params) +
                                    ", the file holds " + std::to_string(view.num_params));
    const auto* p = find_section(view, SectionKind::params);
    if (!p) checkpoint_fail(source, "no parameter section");
    const std::size_t size = type == ElementType::f32 ? 4 : 8;
    if (p->data.size() != num_params * size)
        checkpoint_fail(source, "the parameter section has " + std::to_string(p->data.size()) + " bytes, expected " +
                                    std::to_string(num_params * size) + " (" + std::to_string(num_params) + " x " +
                                    std::to_string(size) + ")");
}

}  // namespace chainlet::detail
