// File helpers shared by the checkpoint and safetensors formats: whole-file reads and atomic writes.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace chainlet {

// Base of every file-format error (CheckpointError, SafetensorsError); the message starts with the file
// (or the name given for an in-memory buffer).
struct IoError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

namespace detail {

// The whole file; IoError "<path>: ..." if it is missing or unreadable.
std::vector<std::byte> read_whole_file(const std::string& path);

// Writes bytes to "<path>.tmp-<pid>" in the same directory, fsyncs it, renames it over path and fsyncs
// the directory. On any failure the temporary file is removed, path is untouched, and IoError is thrown.
void write_file_atomically(const std::string& path, std::span<const std::byte> bytes);

}  // namespace detail
}  // namespace chainlet
