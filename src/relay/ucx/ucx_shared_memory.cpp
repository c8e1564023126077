#include "relay/ucx/ucx_shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>

namespace omnirt::relay::ucx {
namespace {

constexpr std::uint64_t kSharedMagic = 0x6f6d6e692d756378ULL;  // "omni-ucx"

struct SharedHeader {
    std::uint64_t magic;
    std::uint64_t region_id;
    std::uint64_t data_bytes;
};

std::string errno_text() { return std::strerror(errno); }

std::uint64_t random_region_id() {
    static thread_local std::mt19937_64 generator(std::random_device{}());
    return generator() | 1;  // never 0
}

}  // namespace

Result<std::unique_ptr<SharedMemory>> SharedMemory::create(std::size_t nbytes) {
    const std::size_t total = kSharedHeaderBytes + nbytes;
    FileDescriptor fd(::memfd_create("omnirt-ucx-relay", MFD_CLOEXEC));
    if (!fd.valid()) {
        return fail(ErrorCode::resource_exhausted, "ucx relay: memfd_create: " + errno_text());
    }
    if (::ftruncate(fd.get(), static_cast<off_t>(total)) != 0) {
        return fail(ErrorCode::resource_exhausted, "ucx relay: cannot size " +
                                                       std::to_string(total) +
                                                       " bytes of shared memory: " + errno_text());
    }
    void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (base == MAP_FAILED) {
        return fail(ErrorCode::resource_exhausted, "ucx relay: cannot map " +
                                                       std::to_string(total) +
                                                       " bytes of shared memory: " + errno_text());
    }
    std::uint64_t id = random_region_id();
    *static_cast<SharedHeader*>(base) = SharedHeader{kSharedMagic, id, nbytes};
    return std::unique_ptr<SharedMemory>(
        new SharedMemory(static_cast<std::byte*>(base), nbytes, std::move(fd), id));
}

void SharedMemory::release_pages() const {
    (void)::fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      static_cast<off_t>(kSharedHeaderBytes), static_cast<off_t>(size_));
}

SharedMemory::~SharedMemory() { ::munmap(base_, kSharedHeaderBytes + size_); }

Result<std::unique_ptr<PeerMapping>> PeerMapping::open(std::int64_t pid, std::int64_t fd,
                                                       std::uint64_t region_id) {
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    auto gone = [&](const std::string& why) {
        return fail(ErrorCode::unavailable, "ucx relay: the sender's buffer is gone (" + why +
                                                "): the sender exited or released the transfer");
    };
    FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file.valid()) return gone("cannot open " + path + ": " + errno_text());
    struct stat status {};
    if (::fstat(file.get(), &status) != 0 ||
        static_cast<std::size_t>(status.st_size) < kSharedHeaderBytes) {
        return gone(path + " is not a relay region");
    }
    const auto total = static_cast<std::size_t>(status.st_size);
    void* base = ::mmap(nullptr, total, PROT_READ, MAP_SHARED, file.get(), 0);
    if (base == MAP_FAILED) return gone("cannot map " + path + ": " + errno_text());
    SharedHeader header;
    std::memcpy(&header, base, sizeof header);
    if (header.magic != kSharedMagic || header.region_id != region_id ||
        header.data_bytes != total - kSharedHeaderBytes) {
        ::munmap(base, total);
        return gone(path + " now holds another region");
    }
    return std::unique_ptr<PeerMapping>(
        new PeerMapping(static_cast<const std::byte*>(base), header.data_bytes));
}

PeerMapping::~PeerMapping() { ::munmap(const_cast<std::byte*>(base_), kSharedHeaderBytes + size_); }

std::uint64_t pid_namespace_id() {
    static const std::uint64_t id = [] {
        struct stat status {};
        return ::stat("/proc/self/ns/pid", &status) == 0 ? static_cast<std::uint64_t>(status.st_ino)
                                                         : std::uint64_t{0};
    }();
    return id;
}

}  // namespace omnirt::relay::ucx
