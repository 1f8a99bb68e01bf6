// Replays the IDX fuzzer's kept inputs (tests/data/fuzz/fuzz_idx/) and its seed corpus through the
// in-memory reader: each must parse into consistent dims and data, or be rejected with IdxError naming
// the input; nothing else may escape.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <vector>

#include "chainlet/io/idx.hpp"

namespace test_idx_fuzz_replay {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
namespace fs = std::filesystem;

TEST_CASE("IDX fuzz regressions and seeds: parse or IdxError, nothing else", "[idx][fuzz]") {
    std::size_t files = 0, parsed = 0;
    for (const char* sub : {"tests/data/fuzz/fuzz_idx", "fuzz/corpus/fuzz_idx"}) {
        const fs::path dir = fs::path(CHAINLET_SOURCE_DIR) / sub;
        REQUIRE(fs::is_directory(dir));
        for (const auto& entry : fs::directory_iterator(dir)) {
            if (entry.path().extension() == ".md") continue;
            std::ifstream in(entry.path(), std::ios::binary);
            const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            const std::string name = entry.path().filename().string();
            INFO(entry.path());
            ++files;
            try {
                const IdxArray a = parse_idx(bytes, name);
                const std::size_t total = std::accumulate(a.dims.begin(), a.dims.end(), std::size_t{1}, std::multiplies<>());
                REQUIRE(total == a.data.size());
                ++parsed;
            } catch (const IdxError& e) {
                REQUIRE_THAT(e.what(), Catch::StartsWith(name + ": "));
            }
        }
    }
    REQUIRE(files >= 10);
    REQUIRE(parsed >= 7);  // the seeds are valid files
}

TEST_CASE("IDX in memory: multi-member gzip, a cut gzip stream, garbage after gzip", "[idx]") {
    const fs::path dir = fs::path(CHAINLET_SOURCE_DIR) / "tests/data/fuzz/fuzz_idx";
    auto bytes_of = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const IdxArray two = parse_idx(bytes_of(fs::path(CHAINLET_SOURCE_DIR) / "fuzz/corpus/fuzz_idx/two_members.idx.gz"), "two");
    REQUIRE(two.dims == std::vector<std::size_t>{4, 3});
    REQUIRE(two.data == std::vector<std::uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
    REQUIRE_THROWS_WITH(parse_idx(bytes_of(dir / "gzip_cut_in_stream.idx.gz"), "cut"),
                        "cut: truncated gzip data (the compressed stream ends early)");
    REQUIRE_THROWS_WITH(parse_idx(bytes_of(dir / "gzip_then_garbage.idx.gz"), "junk"),
                        Catch::StartsWith("junk: corrupt gzip data (8 bytes after the end"));
}

}  // namespace test_idx_fuzz_replay
