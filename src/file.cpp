#include "chainlet/io/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace chainlet::detail {

namespace {

[[noreturn]] void fail_errno(const std::string& path, const std::string& what, int err) {
    throw IoError(path + ": " + what + " (" + std::strerror(err) + ")");
}

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

std::vector<std::byte> read_whole_file(const std::string& path) {
    Fd f;
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) fail_errno(path, errno == ENOENT ? "no such file" : "cannot open", errno);
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) fail_errno(path, "cannot stat", errno);
    if (!S_ISREG(st.st_mode)) throw IoError(path + ": not a regular file");
    std::vector<std::byte> bytes(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < bytes.size()) {
        const ssize_t r = ::read(f.fd, bytes.data() + got, bytes.size() - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            fail_errno(path, "read error", errno);
        }
        if (r == 0) break;  // shrank while reading: parse what is there, the format checks catch it
        got += static_cast<std::size_t>(r);
    }
    bytes.resize(got);
    return bytes;
}

void write_file_atomically(const std::string& path, std::span<const std::byte> bytes) {
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
    Fd f;
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f.fd < 0) fail_errno(path, "cannot create the temporary file " + tmp, errno);
    // Any failure from here on removes the temporary file; the target is only touched by rename.
    auto abandon = [&](const std::string& what, int err) {
        if (f.fd >= 0) ::close(f.fd);
        f.fd = -1;
        ::unlink(tmp.c_str());
        fail_errno(path, what + " (the previous file, if any, is unchanged)", err);
    };
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t w = ::write(f.fd, bytes.data() + done, bytes.size() - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            abandon("cannot write " + tmp, errno);
        }
        done += static_cast<std::size_t>(w);
    }
    if (::fsync(f.fd) != 0) abandon("cannot fsync " + tmp, errno);
    const int closed = ::close(f.fd);
    f.fd = -1;
    if (closed != 0) abandon("cannot close " + tmp, errno);
    if (::rename(tmp.c_str(), path.c_str()) != 0) abandon("cannot rename " + tmp + " over it", errno);
    // Make the rename itself durable (best effort: some file systems refuse fsync on directories).
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (dir.empty()) dir = std::filesystem::path(".");
    Fd d;
    d.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d.fd >= 0) ::fsync(d.fd);
}

}  // namespace chainlet::detail
