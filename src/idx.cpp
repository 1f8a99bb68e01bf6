#include "chainlet/io/idx.hpp"
#include "chainlet/memory.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <utility>

namespace chainlet {

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) { throw IdxError(name + ": " + what); }

// The decoded bytes of an IDX file: the bytes themselves (raw), or the output of one or more
// concatenated gzip members (as gzip and zlib's gzread accept them). The file's bytes come from
// memory, or from a file read in blocks of 1 MiB, so the whole compressed file is never held at once
// (it would add its size, 26 MB for Fashion-MNIST's training images, to a program's peak memory).
class Decoder {
public:
    Decoder(std::span<const std::uint8_t> bytes, const std::string& name) : in_(bytes), name_(name) { start(); }
    Decoder(std::istream& file, std::size_t file_size, const std::string& name)
        : file_(&file), left_in_file_(file_size), name_(name) {
        block_.resize(std::min<std::size_t>(file_size, 1u << 20) + 2);
        start();
    }
    ~Decoder() {
        if (gzip_) inflateEnd(&z_);
    }
    Decoder(const Decoder&) = delete;
    Decoder& operator=(const Decoder&) = delete;

    // Encoded bytes not yet consumed.
    std::size_t remaining() const { return in_.size() - pos_ + left_in_file_; }
    bool gzip() const { return gzip_; }

    // Decodes up to `size` bytes into out; fewer only at the end of the data.
    std::size_t read(std::uint8_t* out, std::size_t size) {
        std::size_t got = 0;
        if (!gzip_) {
            while (got < size && available(1)) {
                const std::size_t r = std::min(size - got, in_.size() - pos_);
                std::memcpy(out + got, in_.data() + pos_, r);
                pos_ += r;
                got += r;
            }
            return got;
        }
        while (got < size && available(1)) {
            if (member_done_) {
                // Another gzip member may follow; anything else after a member is damage.
                if (!available(2) || in_[pos_] != 0x1f || in_[pos_ + 1] != 0x8b)
                    fail(name_, "corrupt gzip data (" + std::to_string(remaining()) +
                                    " bytes after the end of the compressed stream)");
                inflateReset(&z_);
                member_done_ = false;
            }
            // zlib counts in 32-bit unsigned; feed at most 1 GiB at a time.
            const std::size_t in_chunk = std::min<std::size_t>(in_.size() - pos_, 1u << 30);
            const std::size_t out_chunk = std::min<std::size_t>(size - got, 1u << 30);
            z_.next_in = const_cast<Bytef*>(in_.data() + pos_);
            z_.avail_in = static_cast<uInt>(in_chunk);
            z_.next_out = out + got;
            z_.avail_out = static_cast<uInt>(out_chunk);
            const int r = inflate(&z_, Z_NO_FLUSH);
            pos_ += in_chunk - z_.avail_in;
            got += out_chunk - z_.avail_out;
            if (r == Z_STREAM_END) {
                member_done_ = true;
            } else if (r != Z_OK) {
                if (r == Z_BUF_ERROR && z_.avail_in == 0) continue;  // needs more input (if there is any)
                fail(name_, std::string("corrupt gzip data (") + (z_.msg ? z_.msg : "zlib error " + std::to_string(r)) + ")");
            }
        }
        if (got < size && !member_done_)
            fail(name_, "truncated gzip data (the compressed stream ends early)");
        return got;
    }

private:
    void start() {
        gzip_ = available(2) && in_[pos_] == 0x1f && in_[pos_ + 1] == 0x8b;
        if (gzip_ && inflateInit2(&z_, 15 + 16) != Z_OK) fail(name_, "cannot start the gzip decoder");
    }

    // True if at least k unread bytes are in in_, reading the next block of the file if needed.
    bool available(std::size_t k) {
        const std::size_t kept = in_.size() - pos_;
        if (kept >= k || !file_ || left_in_file_ == 0) return kept >= k;
        if (kept > 0) std::memmove(block_.data(), in_.data() + pos_, kept);  // (in_ may be empty: null data)
        const std::size_t want = std::min(left_in_file_, block_.size() - kept);
        if (!file_->read(reinterpret_cast<char*>(block_.data() + kept), static_cast<std::streamsize>(want)))
            fail(name_, "read error");
        left_in_file_ -= want;
        in_ = std::span<const std::uint8_t>(block_.data(), kept + want);
        pos_ = 0;
        return kept + want >= k;
    }

    std::span<const std::uint8_t> in_;
    std::istream* file_ = nullptr;
    std::size_t left_in_file_ = 0;
    std::vector<std::uint8_t> block_;
    const std::string& name_;
    std::size_t pos_ = 0;
    bool gzip_ = false, member_done_ = false;
    z_stream z_{};
};

// Reads exactly `size` bytes; the caller says what they were meant to be for the error message.
void read_exact(Decoder& d, const std::string& name, std::uint8_t* out, std::size_t size, const char* what) {
    const std::size_t got = d.read(out, size);
    if (got < size)
        fail(name, std::string("truncated: ") + what + " needs " + std::to_string(size) + " bytes, only " +
                       std::to_string(got) + " are there");
}

IdxArray parse(Decoder& d, const std::string& name, std::size_t expected_rank) {
    std::uint8_t magic[4];
    read_exact(d, name, magic, 4, "the header");
    if (magic[0] != 0 || magic[1] != 0) fail(name, "not an IDX file (bad magic number)");
    if (magic[2] != 0x08)
        fail(name, "element type " + std::to_string(magic[2]) + " is not supported (only unsigned bytes, type 8)");
    const std::size_t rank = magic[3];
    if (rank == 0) fail(name, "an IDX file needs at least one dimension");
    if (expected_rank && rank != expected_rank)
        fail(name, "has " + std::to_string(rank) + " dimensions, expected " + std::to_string(expected_rank));
    IdxArray a;
    std::size_t total = 1;
    for (std::size_t i = 0; i < rank; ++i) {
        std::uint8_t b[4];
        read_exact(d, name, b, 4, "the dimensions");
        const std::size_t n = (std::size_t{b[0]} << 24) | (std::size_t{b[1]} << 16) | (std::size_t{b[2]} << 8) | b[3];
        if (n == 0) fail(name, "dimension " + std::to_string(i) + " is zero");
        if (total > (std::size_t{1} << 40) / n) fail(name, "dimensions too large (more than 2^40 elements)");
        total *= n;
        a.dims.push_back(n);
    }
    // If the encoded bytes can hold the data (raw: as many bytes; gzip: deflate expands at most 1032
    // times), the buffer is allocated once at its size: growing it would copy it, and the old and the
    // new buffer together would set the peak memory of a program that loads a data set. Otherwise the
    // buffer grows with the bytes actually decoded (doubling from 64 KiB), so a damaged header that
    // claims far more data than the file holds is reported as truncation, not as a huge allocation.
    const std::size_t could_hold = d.gzip() ? d.remaining() * 1032 : d.remaining();
    if (total <= could_hold) {
        // on huge pages before the bytes are written (advise_huge_pages: a data set read in batches)
        a.data.reserve(total);
        advise_huge_pages(a.data.data(), total);
        a.data.resize(total);
    }
    std::size_t got = 0;
    while (got < total) {
        const std::size_t want = std::min(total, std::max<std::size_t>(2 * got, 1u << 16));
        if (a.data.size() < want) a.data.resize(want);
        const std::size_t r = d.read(a.data.data() + got, want - got);
        got += r;
        if (got < want) break;
    }
    if (got < total)
        fail(name, "truncated: the data needs " + std::to_string(total) + " bytes, only " + std::to_string(got) +
                       " are there");
    std::uint8_t extra;
    if (d.read(&extra, 1) != 0) fail(name, "trailing bytes after the " + std::to_string(total) + " data bytes");
    return a;
}

}  // namespace

IdxArray parse_idx(std::span<const std::uint8_t> bytes, const std::string& name, std::size_t expected_rank) {
    Decoder d(bytes, name);
    return parse(d, name, expected_rank);
}

IdxArray read_idx(const std::string& path, std::size_t expected_rank) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) fail(path, "no such file");
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) fail(path, "cannot read its size (" + ec.message() + ")");
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, "cannot open");
    Decoder d(in, static_cast<std::size_t>(size), path);
    return parse(d, path, expected_rank);
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
