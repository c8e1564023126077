#include "checkpoint/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace omnirt::checkpoint {
namespace {

Error os_error(const std::filesystem::path& path, const char* what, int error_number) {
    ErrorCode code = error_number == ENOENT ? ErrorCode::not_found : ErrorCode::unavailable;
    return Error{code, path.string() + ": " + what + ": " + std::strerror(error_number)};
}

}  // namespace

MappedFile::MappedFile(std::filesystem::path path, const std::byte* data, std::size_t size)
    : path_(std::move(path)), data_(data), size_(size) {}

MappedFile::~MappedFile() {
    if (size_ > 0) ::munmap(const_cast<std::byte*>(data_), size_);
}

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::filesystem::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(os_error(path, "cannot open", errno));
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
        int error_number = errno;
        ::close(fd);
        return fail(os_error(path, "cannot stat", error_number));
    }
    if (!S_ISREG(info.st_mode)) {
        ::close(fd);
        return fail(ErrorCode::invalid_argument, path.string() + ": not a regular file");
    }
    const auto size = static_cast<std::size_t>(info.st_size);
    const std::byte* data = nullptr;
    if (size > 0) {
        void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (mapping == MAP_FAILED) {
            int error_number = errno;
            ::close(fd);
            return fail(os_error(path, "cannot map", error_number));
        }
        data = static_cast<const std::byte*>(mapping);
    }
    // The mapping stays valid after the descriptor is closed.
    ::close(fd);
    return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

void MappedFile::prefetch(std::size_t offset, std::size_t length) const {
    if (offset >= size_ || length == 0) return;
    length = std::min(length, size_ - offset);
    // madvise wants a page-aligned start.
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::size_t aligned = offset / page * page;
    (void)::madvise(const_cast<std::byte*>(data_) + aligned, length + (offset - aligned),
                    MADV_WILLNEED);
}

}  // namespace omnirt::checkpoint
