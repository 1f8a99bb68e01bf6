#include "chainlet/io/safetensors.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>

namespace chainlet {

namespace detail {

void safetensors_fail(const std::string& source, const std::string& what) {
    throw SafetensorsError(source + ": " + what);
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(shape[i]);
    }
    s += ']';
    return s;
}

}  // namespace detail

namespace {

using detail::safetensors_fail;

// A JSON value: just what the header needs, with every container owned by the tree.
struct Json {
    enum Kind { null, boolean, number, string, array, object } kind = null;
    std::string text;                                   // string value, or a number's source text
    std::vector<Json> items;      // array values, or object values in file order
    std::vector<std::string> keys;  // object keys, keys[i] names items[i]
};

// Recursive-descent parser of RFC 8259 JSON; every error names the byte offset in the header.
class JsonParser {
public:
    JsonParser(std::string_view s, const std::string& source) : s_(s), source_(source) {}

    Json parse() {
        Json v = value(0);
        ws();
        if (pos_ != s_.size()) fail("unexpected text after the JSON value");
        return v;
    }

private:
    static constexpr int max_depth = 64;
    std::string_view s_;
    const std::string& source_;
    std::size_t pos_ = 0;

    [[noreturn]] void fail(const std::string& what) const {
        safetensors_fail(source_, "bad JSON header at byte " + std::to_string(pos_) + ": " + what);
    }
    void ws() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
    }
    char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
    void expect(char c) {
        if (pos_ >= s_.size() || s_[pos_] != c) fail(std::string("expected '") + c + "'");
        ++pos_;
    }
    void literal(std::string_view word) {
        if (s_.substr(pos_, word.size()) != word) fail("invalid literal");
        pos_ += word.size();
    }

    Json value(int depth) {
        if (depth > max_depth) fail("nested deeper than " + std::to_string(max_depth) + " levels");
        ws();
        Json v;
        switch (peek()) {
        case '{':
            v.kind = Json::object;
            ++pos_;
            ws();
            if (peek() == '}') {
                ++pos_;
                return v;
            }
            for (;;) {
                ws();
                std::string key = string();
                for (const auto& k : v.keys)
                    if (k == key) fail("duplicate key \"" + key + "\"");
                ws();
                expect(':');
                v.keys.push_back(std::move(key));
                v.items.push_back(value(depth + 1));
                ws();
                if (peek() == ',') {
                    ++pos_;
                    continue;
                }
                expect('}');
                return v;
            }
        case '[':
            v.kind = Json::array;
            ++pos_;
            ws();
            if (peek() == ']') {
                ++pos_;
                return v;
            }
            for (;;) {
                v.items.push_back(value(depth + 1));
                ws();
                if (peek() == ',') {
                    ++pos_;
                    continue;
                }
                expect(']');
                return v;
            }
        case '"':
            v.kind = Json::string;
            v.text = string();
            return v;
        case 't':
            literal("true");
            v.kind = Json::boolean;
            v.text = "true";
            return v;
        case 'f':
            literal("false");
            v.kind = Json::boolean;
            return v;
        case 'n':
            literal("null");
            return v;
        default:
            v.kind = Json::number;
            v.text = number();
            return v;
        }
    }

    static bool digit(char c) { return c >= '0' && c <= '9'; }

    std::string number() {
        const std::size_t start = pos_;
        if (peek() == '-') ++pos_;
        if (peek() == '0') ++pos_;
        else if (digit(peek())) while (digit(peek())) ++pos_;
        else fail("expected a value");
        if (peek() == '.') {
            ++pos_;
            if (!digit(peek())) fail("expected a digit after '.'");
            while (digit(peek())) ++pos_;
        }
        if (peek() == 'e' || peek() == 'E') {
            ++pos_;
            if (peek() == '+' || peek() == '-') ++pos_;
            if (!digit(peek())) fail("expected a digit in the exponent");
            while (digit(peek())) ++pos_;
        }
        return std::string(s_.substr(start, pos_ - start));
    }

    unsigned hex4() {
        if (s_.size() - pos_ < 4) fail("truncated \\u escape");
        unsigned u = 0;
        for (int i = 0; i < 4; ++i) {
            const char c = s_[pos_++];
            u <<= 4;
            if (digit(c)) u |= static_cast<unsigned>(c - '0');
            else if (c >= 'a' && c <= 'f') u |= static_cast<unsigned>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') u |= static_cast<unsigned>(c - 'A' + 10);
            else fail("bad hex digit in \\u escape");
        }
        return u;
    }

    static void utf8(std::string& out, unsigned cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    std::string string() {
        expect('"');
        std::string out;
        for (;;) {
            if (pos_ >= s_.size()) fail("unterminated string");
            const char c = s_[pos_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= s_.size()) fail("unterminated escape");
            switch (const char e = s_[pos_++]) {
            case '"': case '\\': case '/': out += e; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                unsigned cp = hex4();
                if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
                    if (s_.substr(pos_, 2) != "\\u") fail("lone high surrogate");
                    pos_ += 2;
                    const unsigned lo = hex4();
                    if (lo < 0xDC00 || lo >= 0xE000) fail("bad low surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp < 0xE000) {
                    fail("lone low surrogate");
                }
                utf8(out, cp);
                break;
            }
            default: fail("unknown escape");
            }
        }
    }
};

// Bytes per element of the dtypes safetensors defines.
std::size_t dtype_size(const std::string& d) {
    static const std::map<std::string, std::size_t> sizes = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
        {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
    const auto it = sizes.find(d);
    return it == sizes.end() ? 0 : it->second;
}

// A non-negative integer that fits in 2^53 (what JSON numbers carry exactly).
std::uint64_t to_index(const Json& v, const std::string& source, const std::string& what) {
    if (v.kind != Json::number || v.text.empty() || v.text[0] == '-' ||
        v.text.find_first_of(".eE") != std::string::npos || v.text.size() > 16)
        safetensors_fail(source, what + " must be a non-negative integer below 2^53");
    return std::stoull(v.text);
}

const Json* member(const Json& obj, const char* key) {
    for (std::size_t i = 0; i < obj.keys.size(); ++i)
        if (obj.keys[i] == key) return &obj.items[i];
    return nullptr;
}

}  // namespace

Safetensors parse_safetensors(std::vector<std::byte> bytes, const std::string& source) {
    Safetensors file;
    file.bytes = std::move(bytes);
    const auto& b = file.bytes;
    if (b.size() < 8)
        safetensors_fail(source, "truncated: " + std::to_string(b.size()) + " bytes, the header length alone needs 8");
    std::uint64_t header_len;
    std::memcpy(&header_len, b.data(), 8);
    constexpr std::uint64_t max_header = 100'000'000;  // the reference implementation's limit
    if (header_len > max_header)
        safetensors_fail(source, "header length " + std::to_string(header_len) + " exceeds the limit of " +
                                     std::to_string(max_header) + " bytes (not a safetensors file?)");
    if (header_len > b.size() - 8)
        safetensors_fail(source, "truncated: the header needs " + std::to_string(header_len) + " bytes, only " +
                                     std::to_string(b.size() - 8) + " follow the length");
    const std::string_view header(reinterpret_cast<const char*>(b.data()) + 8, static_cast<std::size_t>(header_len));
    const Json root = JsonParser(header, source).parse();
    if (root.kind != Json::object) safetensors_fail(source, "the JSON header is not an object");
    const std::size_t data_begin = 8 + static_cast<std::size_t>(header_len);
    const std::span<const std::byte> data = std::span(b).subspan(data_begin);

    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (std::size_t i = 0; i < root.keys.size(); ++i) {
        const std::string& name = root.keys[i];
        const Json& v = root.items[i];
        if (name == "__metadata__") {
            if (v.kind != Json::object) safetensors_fail(source, "__metadata__ is not an object");
            for (std::size_t j = 0; j < v.keys.size(); ++j) {
                if (v.items[j].kind != Json::string)
                    safetensors_fail(source, "metadata \"" + v.keys[j] + "\" is not a string");
                file.metadata.emplace_back(v.keys[j], v.items[j].text);
            }
            continue;
        }
        const std::string what = "tensor \"" + name + "\"";
        if (v.kind != Json::object) safetensors_fail(source, what + " is not described by an object");
        const Json* dtype = member(v, "dtype");
        const Json* shape = member(v, "shape");
        const Json* offsets = member(v, "data_offsets");
        if (!dtype || dtype->kind != Json::string) safetensors_fail(source, what + ": no \"dtype\" string");
        if (!shape || shape->kind != Json::array) safetensors_fail(source, what + ": no \"shape\" array");
        if (!offsets || offsets->kind != Json::array || offsets->items.size() != 2)
            safetensors_fail(source, what + ": no \"data_offsets\" pair");
        const std::size_t esize = dtype_size(dtype->text);
        if (esize == 0) safetensors_fail(source, what + ": unknown dtype \"" + dtype->text + "\"");
        SafeTensor t{name, dtype->text, {}, {}};
        std::uint64_t count = 1;
        for (const auto& e : shape->items) {
            const std::uint64_t d = to_index(e, source, what + ": a shape extent");
            if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / 8 / d)
                safetensors_fail(source, what + ": shape " + detail::shape_text(t.shape) + " is too large");
            t.shape.push_back(d);
            count *= d;
        }
        const std::uint64_t begin = to_index(offsets->items[0], source, what + ": data_offsets[0]");
        const std::uint64_t end = to_index(offsets->items[1], source, what + ": data_offsets[1]");
        if (begin > end || end > data.size())
            safetensors_fail(source, what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                         "] out of range (the data section has " + std::to_string(data.size()) +
                                         " bytes)");
        if (end - begin != count * esize)
            safetensors_fail(source, what + ": " + std::to_string(end - begin) + " data bytes, but " + dtype->text +
                                         " " + detail::shape_text(t.shape) + " needs " +
                                         std::to_string(count * esize));
        t.data = data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
        ranges.emplace_back(begin, end);
        file.tensors.push_back(std::move(t));
    }
    // Tensors may not overlap (the format also asks them to cover the data exactly; we only need
    // them to be disjoint).
    std::vector<std::size_t> order(ranges.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t c) { return ranges[a] < ranges[c]; });
    for (std::size_t i = 1; i < order.size(); ++i)
        if (ranges[order[i]].first < ranges[order[i - 1]].second)
            safetensors_fail(source, "tensors \"" + file.tensors[order[i - 1]].name + "\" and \"" +
                                         file.tensors[order[i]].name + "\" overlap");
    std::vector<SafeTensor> sorted;
    for (std::size_t i : order) sorted.push_back(std::move(file.tensors[i]));
    file.tensors = std::move(sorted);
    return file;
}

Safetensors read_safetensors(const std::string& path) { return parse_safetensors(detail::read_whole_file(path), path); }

namespace {

void json_string(std::string& out, const std::string& s) {
    out += '"';
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u < 0x20) {
            static const char hex[] = "0123456789abcdef";
            out += "\\u00";
            out += hex[u >> 4];
            out += hex[u & 15];
        } else {
            out += c;
        }
    }
    out += '"';
}

}  // namespace

std::vector<std::byte> encode_safetensors(const std::vector<SafeTensor>& tensors,
                                          const std::vector<std::pair<std::string, std::string>>& metadata) {
    std::string h = "{";
    if (!metadata.empty()) {
        h += "\"__metadata__\":{";
        for (std::size_t i = 0; i < metadata.size(); ++i) {
            if (i) h += ',';
            json_string(h, metadata[i].first);
            h += ':';
            json_string(h, metadata[i].second);
        }
        h += '}';
    }
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        if (h.size() > 1) h += ',';
        json_string(h, t.name);
        h += ":{\"dtype\":";
        json_string(h, t.dtype);
        h += ",\"shape\":" + detail::shape_text(t.shape) + ",\"data_offsets\":[" + std::to_string(offset) + "," +
             std::to_string(offset + t.data.size()) + "]}";
        offset += t.data.size();
    }
    h += '}';
    h.append((8 - h.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as safetensors writes it
    std::vector<std::byte> out(8 + h.size() + offset);
    const std::uint64_t len = h.size();
    std::memcpy(out.data(), &len, 8);
    std::memcpy(out.data() + 8, h.data(), h.size());
    std::size_t at = 8 + h.size();
    for (const auto& t : tensors) {
        if (!t.data.empty()) std::memcpy(out.data() + at, t.data.data(), t.data.size());
        at += t.data.size();
    }
    return out;
}

void write_safetensors(const std::string& path, const std::vector<SafeTensor>& tensors,
                       const std::vector<std::pair<std::string, std::string>>& metadata) {
    detail::write_file_atomically(path, encode_safetensors(tensors, metadata));
}

}  // namespace chainlet
