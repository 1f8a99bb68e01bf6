// Files for the tests: a scratch directory, whole-file reads, and a walk over the fuzzers' inputs.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace test {

// A fresh directory under the system's temporary directory, removed with everything in it at scope exit.
// The name holds the process id and a counter, so parallel ctest processes and nested scopes never share one.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& prefix = "chainlet-test") {
        static int counter = 0;
        path = std::filesystem::temp_directory_path() /
               (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return (path / name).string(); }
};

inline std::vector<std::byte> file_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> b(c.size());
    if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
    return b;
}

// Calls f(bytes, path) for every regular file in dir, none if dir does not exist; returns how many.
template <class F>
std::size_t for_each_file(const std::filesystem::path& dir, F&& f) {
    std::size_t n = 0;
    if (!std::filesystem::exists(dir)) return n;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (!e.is_regular_file()) continue;
        f(file_bytes(e.path()), e.path());
        ++n;
    }
    return n;
}

}  // namespace test
