// Reader for IDX files, the format of MNIST and Fashion-MNIST: big-endian magic 0x0000 TT DD (TT the
// element type, DD the number of dimensions), DD big-endian 32-bit extents, then the elements.
// Files may be gzip-compressed (one or more members) or raw. Only unsigned bytes (type 0x08), the type of
// every MNIST-family file, are accepted.
//
// Every problem is reported as chainlet::IdxError, whose message names the file and what is wrong:
// missing, unreadable, corrupt compression, bad magic, wrong element type or rank, truncated data, or
// trailing bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace chainlet {

struct IdxError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct IdxArray {
    std::vector<std::size_t> dims;   // e.g. {60000, 28, 28}
    std::vector<std::uint8_t> data;  // row-major, dims[0] * dims[1] * ... bytes
};

// Reads an IDX file of unsigned bytes. If expected_rank is non-zero the file must have that many
// dimensions.
IdxArray read_idx(const std::string& path, std::size_t expected_rank = 0);

// The same from bytes in memory (raw or gzip, detected by the gzip magic 1f 8b); `name` stands for the
// file in error messages. (read_idx decodes the file as it reads it, in blocks.)
IdxArray parse_idx(std::span<const std::uint8_t> bytes, const std::string& name, std::size_t expected_rank = 0);

// An image classification data set in memory: n rows of height * width pixel bytes (one channel),
// and n labels. Pixels stay bytes (a quarter of the memory of floats); pass them to the library as
// chainlet::ByteData with the scale and offset that normalise them.
struct ImageDataset {
    std::size_t count = 0, height = 0, width = 0;
    std::vector<std::uint8_t> pixels;
    std::vector<std::int32_t> labels;
};

// Loads "<dir>/<prefix>-images-idx3-ubyte[.gz]" and "<dir>/<prefix>-labels-idx1-ubyte[.gz]"
// (prefix "train" or "t10k"), checking that the two files agree on the number of samples and that
// every label is below num_classes.
ImageDataset load_idx_dataset(const std::string& dir, const std::string& prefix, std::size_t num_classes = 10);

}  // namespace chainlet
