#include "chainlet/io/safetensors.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

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

// The header is parsed by nlohmann::json (RFC 8259, strict: no comments, no trailing text, UTF-8
// checked). ordered_json keeps the file's key order (the metadata come back in it). Two things it
// allows are refused here, from its parser callback: a key repeated in one object (nlohmann keeps one
// of them silently) and nesting deeper than max_depth (a header is two levels deep; the limit keeps a
// hostile file from building a deep tree).
using Json = nlohmann::ordered_json;

Json parse_header(std::string_view header, const std::string& source) {
    constexpr int max_depth = 64;
    std::vector<std::set<std::string>> keys;  // keys[d]: the keys seen so far in the open object at depth d
    auto check = [&](int depth, Json::parse_event_t event, Json& parsed) {
        const auto d = static_cast<std::size_t>(depth);
        if (event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) {
            if (depth >= max_depth)
                safetensors_fail(source, "bad JSON header: nested deeper than " + std::to_string(max_depth) + " levels");
            if (event == Json::parse_event_t::object_start) {
                if (keys.size() <= d) keys.resize(d + 1);
                keys[d].clear();
            }
        } else if (event == Json::parse_event_t::key) {  // depth: that of the object's members
            if (!keys[d - 1].insert(parsed.get_ref<const std::string&>()).second)
                safetensors_fail(source, "bad JSON header: duplicate key \"" + parsed.get_ref<const std::string&>() + "\"");
        }
        return true;
    };
    try {
        return Json::parse(header.begin(), header.end(), check);
    } catch (const Json::parse_error& e) {
        // e.byte counts from 1 (the last byte read); report the 0-based offset in the header, and
        // nlohmann's description without its "[json.exception...] parse error at line 1, column n: " prefix.
        std::string what = e.what();
        if (const auto colon = what.find(": "); colon != std::string::npos) what.erase(0, colon + 2);
        safetensors_fail(source, "bad JSON header at byte " + std::to_string(e.byte == 0 ? 0 : e.byte - 1) + ": " + what);
    } catch (const Json::exception& e) {
        // out_of_range 406, a number beyond double's range (1e400): thrown without a position, which
        // the SAX interface reports.
        struct Locate : nlohmann::json_sax<Json> {
            std::size_t at = 0;
            bool null() override { return true; }
            bool boolean(bool) override { return true; }
            bool number_integer(number_integer_t) override { return true; }
            bool number_unsigned(number_unsigned_t) override { return true; }
            bool number_float(number_float_t, const string_t&) override { return true; }
            bool string(string_t&) override { return true; }
            bool binary(binary_t&) override { return true; }
            bool start_object(std::size_t) override { return true; }
            bool key(string_t&) override { return true; }
            bool end_object() override { return true; }
            bool start_array(std::size_t) override { return true; }
            bool end_array() override { return true; }
            bool parse_error(std::size_t position, const std::string&, const Json::exception&) override {
                at = position;
                return false;
            }
        } locate;
        Json::sax_parse(header.begin(), header.end(), &locate);
        std::string what = e.what();
        if (const auto bracket = what.find("] "); bracket != std::string::npos) what.erase(0, bracket + 2);
        safetensors_fail(source, "bad JSON header at byte " + std::to_string(locate.at == 0 ? 0 : locate.at - 1) +
                                     ": " + what);
    }
}

// Bytes per element of the dtypes safetensors defines.
std::size_t dtype_size(const std::string& d) {
    static const std::map<std::string, std::size_t> sizes = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
        {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
    const auto it = sizes.find(d);
    return it == sizes.end() ? 0 : it->second;
}

// A non-negative integer below 2^53 (what JSON numbers carry exactly in every reader).
std::uint64_t to_index(const Json& v, const std::string& source, const std::string& what) {
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() >= (std::uint64_t{1} << 53))
        safetensors_fail(source, what + " must be a non-negative integer below 2^53");
    return v.get<std::uint64_t>();
}

const Json* member(const Json& obj, const char* key) {
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
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
    const Json root = parse_header(header, source);
    if (!root.is_object()) safetensors_fail(source, "the JSON header is not an object");
    const std::size_t data_begin = 8 + static_cast<std::size_t>(header_len);
    const std::span<const std::byte> data = std::span(b).subspan(data_begin);

    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (const auto& [name, v] : root.items()) {
        if (name == "__metadata__") {
            if (!v.is_object()) safetensors_fail(source, "__metadata__ is not an object");
            for (const auto& [key, value] : v.items()) {
                if (!value.is_string()) safetensors_fail(source, "metadata \"" + key + "\" is not a string");
                file.metadata.emplace_back(key, value.get<std::string>());
            }
            continue;
        }
        const std::string what = "tensor \"" + name + "\"";
        if (!v.is_object()) safetensors_fail(source, what + " is not described by an object");
        const Json* dtype = member(v, "dtype");
        const Json* shape = member(v, "shape");
        const Json* offsets = member(v, "data_offsets");
        if (!dtype || !dtype->is_string()) safetensors_fail(source, what + ": no \"dtype\" string");
        if (!shape || !shape->is_array()) safetensors_fail(source, what + ": no \"shape\" array");
        if (!offsets || !offsets->is_array() || offsets->size() != 2)
            safetensors_fail(source, what + ": no \"data_offsets\" pair");
        const std::string& dtype_name = dtype->get_ref<const std::string&>();
        const std::size_t esize = dtype_size(dtype_name);
        if (esize == 0) safetensors_fail(source, what + ": unknown dtype \"" + dtype_name + "\"");
        SafeTensor t{name, dtype_name, {}, {}};
        std::uint64_t count = 1;
        for (const auto& e : *shape) {
            const std::uint64_t d = to_index(e, source, what + ": a shape extent");
            if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / 8 / d)
                safetensors_fail(source, what + ": shape " + detail::shape_text(t.shape) + " is too large");
            t.shape.push_back(d);
            count *= d;
        }
        const std::uint64_t begin = to_index((*offsets)[0], source, what + ": data_offsets[0]");
        const std::uint64_t end = to_index((*offsets)[1], source, what + ": data_offsets[1]");
        if (begin > end || end > data.size())
            safetensors_fail(source, what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                         "] out of range (the data section has " + std::to_string(data.size()) +
                                         " bytes)");
        if (end - begin != count * esize)
            safetensors_fail(source, what + ": " + std::to_string(end - begin) + " data bytes, but " + dtype_name +
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

std::vector<std::byte> encode_safetensors(const std::vector<SafeTensor>& tensors,
                                          const std::vector<std::pair<std::string, std::string>>& metadata) {
    // A repeated name would overwrite an entry of the header: refused, as the reader refuses it.
    auto fresh = [](const Json& object, const std::string& key, const char* what) {
        if (object.contains(key))
            throw std::invalid_argument(std::string("encode_safetensors: ") + what + " \"" + key + "\" appears twice" +
                                        (key == "__metadata__" ? " (the name of the metadata entry)" : ""));
        return key;
    };
    Json header = Json::object();
    if (!metadata.empty()) {
        Json& m = header["__metadata__"] = Json::object();
        for (const auto& [key, value] : metadata) m[fresh(m, key, "metadata key")] = value;
    }
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        header[fresh(header, t.name, "tensor name")] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
        offset += t.data.size();
    }
    std::string h;
    try {
        h = header.dump();  // compact, UTF-8 kept as is
    } catch (const Json::type_error& e) {  // 316: a name or metadata string that is not valid UTF-8
        throw std::invalid_argument(std::string("encode_safetensors: a tensor name or metadata string is not valid "
                                                "UTF-8, which the JSON header needs (") + e.what() + ")");
    }
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
