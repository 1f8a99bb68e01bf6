#include "chainlet/io/idx.hpp"

#include <zlib.h>

#include <filesystem>
#include <memory>
#include <utility>

namespace chainlet {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw IdxError(path + ": " + what); }

struct GzCloser {
    void operator()(gzFile f) const { gzclose(f); }
};

// Reads exactly `size` bytes; the caller says what they were meant to be for the error message.
void read_exact(gzFile f, const std::string& path, void* out, std::size_t size, const char* what) {
    auto* p = static_cast<unsigned char*>(out);
    std::size_t got = 0;
    while (got < size) {
        const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(size - got, 1u << 30));
        const int r = gzread(f, p + got, chunk);
        if (r < 0) {
            int code = 0;
            const char* msg = gzerror(f, &code);
            fail(path, std::string("corrupt or unreadable data (") + (msg ? msg : "zlib error") + ")");
        }
        if (r == 0) break;
        got += static_cast<std::size_t>(r);
    }
    if (got < size)
        fail(path, std::string("truncated: ") + what + " needs " + std::to_string(size) + " bytes, only " +
                       std::to_string(got) + " are there");
}

}  // namespace

IdxArray read_idx(const std::string& path, std::size_t expected_rank) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) fail(path, "no such file");
    std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
    if (!f) fail(path, "cannot open");
    unsigned char magic[4];
    read_exact(f.get(), path, magic, 4, "the header");
    if (magic[0] != 0 || magic[1] != 0) fail(path, "not an IDX file (bad magic number)");
    if (magic[2] != 0x08)
        fail(path, "element type " + std::to_string(magic[2]) + " is not supported (only unsigned bytes, type 8)");
    const std::size_t rank = magic[3];
    if (rank == 0) fail(path, "an IDX file needs at least one dimension");
    if (expected_rank && rank != expected_rank)
        fail(path, "has " + std::to_string(rank) + " dimensions, expected " + std::to_string(expected_rank));
    IdxArray a;
    std::size_t total = 1;
    for (std::size_t i = 0; i < rank; ++i) {
        unsigned char b[4];
        read_exact(f.get(), path, b, 4, "the dimensions");
        const std::size_t d = (std::size_t{b[0]} << 24) | (std::size_t{b[1]} << 16) | (std::size_t{b[2]} << 8) | b[3];
        if (d == 0) fail(path, "dimension " + std::to_string(i) + " is zero");
        if (total > (std::size_t{1} << 40) / d) fail(path, "dimensions too large");
        total *= d;
        a.dims.push_back(d);
    }
    a.data.resize(total);
    read_exact(f.get(), path, a.data.data(), total, "the data");
    unsigned char extra;
    if (gzread(f.get(), &extra, 1) != 0) fail(path, "trailing bytes after the " + std::to_string(total) + " data bytes");
    return a;
}

ImageDataset load_idx_dataset(const std::string& dir, const std::string& prefix, std::size_t num_classes) {
    auto find = [&](const std::string& stem) {
        const std::string raw = dir + "/" + stem;
        std::error_code ec;
        if (std::filesystem::is_regular_file(raw + ".gz", ec)) return raw + ".gz";
        if (std::filesystem::is_regular_file(raw, ec)) return raw;
        throw IdxError(raw + ".gz: no such file (nor " + raw + ")");
    };
    const std::string image_path = find(prefix + "-images-idx3-ubyte");
    const std::string label_path = find(prefix + "-labels-idx1-ubyte");
    IdxArray images = read_idx(image_path, 3);
    const IdxArray labels = read_idx(label_path, 1);
    if (images.dims[0] != labels.dims[0])
        throw IdxError(image_path + ": holds " + std::to_string(images.dims[0]) + " images but " + label_path +
                       " holds " + std::to_string(labels.dims[0]) + " labels");
    ImageDataset d;
    d.count = images.dims[0];
    d.height = images.dims[1];
    d.width = images.dims[2];
    d.pixels = std::move(images.data);
    d.labels.resize(d.count);
    for (std::size_t i = 0; i < d.count; ++i) {
        if (labels.data[i] >= num_classes)
            throw IdxError(label_path + ": label " + std::to_string(labels.data[i]) + " of sample " + std::to_string(i) +
                           " is not below " + std::to_string(num_classes));
        d.labels[i] = labels.data[i];
    }
    return d;
}

}  // namespace chainlet
