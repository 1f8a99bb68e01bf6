// The IDX reader on small files the test writes itself, raw and gzip-compressed, and on broken ones:
// each error must name the file and the problem.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chainlet/io/idx.hpp"
#include "chainlet/memory.hpp"
#include "files.hpp"

namespace test_idx {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
namespace fs = std::filesystem;

namespace {

std::vector<unsigned char> idx_bytes(std::vector<std::uint32_t> dims, const std::vector<unsigned char>& data,
                                     unsigned char type = 0x08) {
    std::vector<unsigned char> b = {0, 0, type, static_cast<unsigned char>(dims.size())};
    for (auto d : dims)
        for (int sh : {24, 16, 8, 0}) b.push_back(static_cast<unsigned char>(d >> sh));
    b.insert(b.end(), data.begin(), data.end());
    return b;
}

using test::TempDir;

// Writes bytes to dir/name, gzip-compressed if gz; returns the path.
std::string write(const TempDir& dir, const std::string& name, const std::vector<unsigned char>& bytes, bool gz) {
    const std::string p = dir.file(name);
    if (gz) {
        gzFile f = gzopen(p.c_str(), "wb");
        gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
        gzclose(f);
    } else {
        std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                 static_cast<std::streamsize>(bytes.size()));
    }
    return p;
}

std::vector<unsigned char> ramp(std::size_t n) {
    std::vector<unsigned char> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 7);
    return v;
}

// Whether the kernel's transparent huge pages can be advised here (Linux with THP built in), and the
// VmFlags of the mapping holding address p (/proc/self/smaps; "hg": advised for huge pages).
bool huge_pages_available() { return fs::exists("/sys/kernel/mm/transparent_hugepage/enabled"); }
std::string vm_flags(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        std::uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= at && at < hi;
        else if (inside && line.rfind("VmFlags:", 0) == 0) return line + " ";
    }
    return "";
}

}  // namespace

TEST_CASE("aligned_vector: 64-byte aligned, and from 2 MiB on aligned to and advised for huge pages", "[memory]") {
    const aligned_vector<float> small(1000, 1.0f);
    REQUIRE(reinterpret_cast<std::uintptr_t>(small.data()) % 64 == 0);
    aligned_vector<float> big(huge_page_bytes / sizeof(float) + 3);  // just over one huge page
    REQUIRE(reinterpret_cast<std::uintptr_t>(big.data()) % huge_page_bytes == 0);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1000);
    double sum = 0;
    for (float v : big) sum += v;
    const std::size_t n = big.size();
    REQUIRE(sum == static_cast<double>(n / 1000) * 499500.0 + static_cast<double>((n % 1000) * (n % 1000 - 1) / 2));
    // a range without a whole huge page is not advised
    REQUIRE_FALSE(advise_huge_pages(big.data() + 1, huge_page_bytes));
    if (huge_pages_available()) {
        REQUIRE(vm_flags(big.data()).find(" hg ") != std::string::npos);
        REQUIRE(advise_huge_pages(big.data(), huge_page_bytes));
    }
    // growing and shrinking across the threshold keeps the contents (deallocate frees by the size it got)
    aligned_vector<float> v(10, 2.0f);
    v.resize(huge_page_bytes / sizeof(float) + 100, 3.0f);
    v.resize(5);
    v.shrink_to_fit();
    REQUIRE(v == aligned_vector<float>(5, 2.0f));
}

TEST_CASE("IDX: reads raw and gzip files", "[idx]") {
    TempDir dir;
    for (bool gz : {false, true}) {
        const auto p = write(dir, gz ? "a.gz" : "a", idx_bytes({3, 2, 5}, ramp(30)), gz);
        const IdxArray a = read_idx(p, 3);
        REQUIRE(a.dims == std::vector<std::size_t>{3, 2, 5});
        REQUIRE(a.data == ramp(30));
    }
}

TEST_CASE("IDX: every broken file is a clear error naming the file", "[idx][errors]") {
    TempDir dir;
    auto expect = [&](const std::string& file, const std::string& what, std::size_t rank = 0) {
        INFO(file);
        REQUIRE_THROWS_AS(read_idx(file, rank), IdxError);
        REQUIRE_THROWS_WITH(read_idx(file, rank), Catch::StartsWith(file + ": ") && Catch::Contains(what));
    };
    expect((dir.path / "missing.gz").string(), "no such file");
    expect(write(dir, "empty", {}, false), "truncated: the header");
    expect(write(dir, "magic", {1, 2, 8, 1, 0, 0, 0, 1, 5}, false), "bad magic number");
    expect(write(dir, "type", idx_bytes({2}, {1, 2}, 0x0D), false), "element type 13 is not supported");
    expect(write(dir, "rank", idx_bytes({2, 2}, {1, 2, 3, 4}), false), "has 2 dimensions, expected 1", 1);
    auto short_data = idx_bytes({4, 4}, ramp(16));
    short_data.resize(short_data.size() - 3);
    expect(write(dir, "short.gz", short_data, true), "truncated: the data needs 16 bytes, only 13");
    auto short_dims = idx_bytes({4, 4}, {});
    short_dims.resize(9);
    expect(write(dir, "dims", short_dims, false), "truncated: the dimensions");
    auto long_data = idx_bytes({2}, {1, 2});
    long_data.push_back(9);
    expect(write(dir, "long", long_data, false), "trailing bytes");
    expect(write(dir, "zero", idx_bytes({0}, {}), false), "dimension 0 is zero");
    // A gzip file with its compressed bytes damaged.
    const auto good = write(dir, "bad.gz", idx_bytes({64, 64}, ramp(4096)), true);
    std::vector<char> bytes;
    {
        std::ifstream in(good, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    for (std::size_t i = 20; i + 10 < bytes.size(); i += 7) bytes[i] = static_cast<char>(bytes[i] ^ 0x5A);
    std::ofstream(good, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    INFO("damaged gzip");
    REQUIRE_THROWS_AS(read_idx(good), IdxError);
    REQUIRE_THROWS_WITH(read_idx(good), Catch::StartsWith(good + ": "));
}

TEST_CASE("IDX data set: pixels as stored, labels checked against the images and the classes", "[idx]") {
    TempDir dir;
    write(dir, "train-images-idx3-ubyte.gz", idx_bytes({3, 2, 2}, {0, 255, 51, 102, 0, 0, 0, 0, 1, 2, 3, 4}), true);
    write(dir, "train-labels-idx1-ubyte", idx_bytes({3}, {9, 0, 4}), false);
    const ImageDataset d = load_idx_dataset(dir.path.string(), "train");
    REQUIRE(d.count == 3);
    REQUIRE(d.height == 2);
    REQUIRE(d.width == 2);
    REQUIRE(d.pixels == std::vector<std::uint8_t>{0, 255, 51, 102, 0, 0, 0, 0, 1, 2, 3, 4});
    REQUIRE(d.labels == std::vector<std::int32_t>{9, 0, 4});
    write(dir, "t10k-images-idx3-ubyte.gz", idx_bytes({3, 2, 2}, ramp(12)), true);
    write(dir, "t10k-labels-idx1-ubyte.gz", idx_bytes({2}, {1, 2}), true);
    REQUIRE_THROWS_WITH(load_idx_dataset(dir.path.string(), "t10k"), Catch::Contains("holds 3 images but"));
    write(dir, "t10k-labels-idx1-ubyte.gz", idx_bytes({3}, {1, 2, 10}), true);
    REQUIRE_THROWS_WITH(load_idx_dataset(dir.path.string(), "t10k"), Catch::Contains("label 10 of sample 2 is not below 10"));
    REQUIRE_THROWS_WITH(load_idx_dataset(dir.path.string(), "nope"), Catch::Contains("no such file"));
}

// read_idx decodes a file in blocks of 1 MiB: files of several blocks, raw and gzip, and a gzip file of
// two members whose boundary falls on a block boundary, give the bytes parse_idx gives from memory.
TEST_CASE("IDX: files of several read blocks, and gzip members across a block boundary", "[idx]") {
    TempDir dir;
    std::vector<unsigned char> data(3 * 1024 * 1024 + 77);
    std::uint32_t r = 12345;
    for (auto& v : data) v = static_cast<unsigned char>((r = r * 1103515245u + 12345u) >> 24);  // incompressible
    const auto bytes = idx_bytes({static_cast<std::uint32_t>(data.size())}, data);
    for (bool gz : {false, true}) {
        const IdxArray a = read_idx(write(dir, gz ? "big.idx.gz" : "big.idx", bytes, gz), 1);
        REQUIRE(a.data == data);
    }
    // Two members, the first ending exactly at the first block boundary (a stored member of random
    // bytes is a little longer than its input: cut the input so its compressed size is 1 MiB).
    const std::string p = dir.file("two.idx.gz");
    std::size_t first = (1u << 20) - 200;
    for (int tries = 0;; ++tries) {
        {
            gzFile f = gzopen(p.c_str(), "wb");
            gzwrite(f, bytes.data(), static_cast<unsigned>(first));
            gzclose(f);
        }
        const auto size = fs::file_size(p);
        if (size == (1u << 20) || tries > 50) break;
        first = first + (1u << 20) - size;
    }
    REQUIRE(fs::file_size(p) == (1u << 20));
    {
        gzFile f = gzopen(p.c_str(), "ab");
        gzwrite(f, bytes.data() + first, static_cast<unsigned>(bytes.size() - first));
        gzclose(f);
    }
    REQUIRE(read_idx(p, 1).data == data);
}

TEST_CASE("IDX: a data set of several MiB is read into memory advised for huge pages", "[idx][memory]") {
    TempDir dir;
    const std::size_t count = 6000;  // 6000 x 28 x 28 bytes: 4.5 MiB
    const auto pixels = ramp(count * 28 * 28);
    for (bool gz : {false, true}) {
        const auto bytes = idx_bytes({static_cast<std::uint32_t>(count), 28, 28}, pixels);
        const IdxArray a = read_idx(write(dir, gz ? "big.gz" : "big", bytes, gz), 3);
        REQUIRE(a.data == std::vector<std::uint8_t>(pixels.begin(), pixels.end()));
        // the 2 MiB-aligned inside of the buffer (its first whole huge page)
        const auto begin = reinterpret_cast<std::uintptr_t>(a.data.data());
        const auto first = (begin + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
        if (huge_pages_available())
            REQUIRE(vm_flags(reinterpret_cast<const void*>(first)).find(" hg ") != std::string::npos);
    }
}

}  // namespace test_idx
