#pragma once
// Shared memory between a ucx relay's sender and readers on its host. The sender's registered
// memory lives in a memfd whose first page is a header (magic, a random region id, the size);
// a reader opens it through /proc/<pid>/fd/<fd>, checks the header against the metadata and
// copies out of its own read-only mapping. Every failure is an ordinary, reported error.
//
// Why not UCX's own shared-memory keys: in UCX 1.13 a ucp_ep_rkey_unpack whose posix/sysv segment
// is gone (the sender exited or released it) fails into ucp_rkey_destroy of keys it never
// unpacked and crashes. Keys of memfd memory registered with ucp_mem_map carry no
// shared-memory component, so unpacking them cannot attach anything and cannot fail that way.
//
// Thread safety: instances are immutable after creation; destroy them on one thread.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/error.h"
#include "relay/ucx/ucx_file_descriptor.h"

namespace omnirt::relay::ucx {

inline constexpr std::size_t kSharedHeaderBytes = 4096;

// The sender's side: memfd-backed memory of `size()` bytes after a header page, mapped
// read-write (not faulted in: see prefault()). Unmapped and closed on destruction.
class SharedMemory {
  public:
    [[nodiscard]] static Result<std::unique_ptr<SharedMemory>> create(std::size_t nbytes);
    SharedMemory(const SharedMemory&) = delete;
    SharedMemory& operator=(const SharedMemory&) = delete;
    ~SharedMemory();

    [[nodiscard]] std::byte* data() const { return base_ + kSharedHeaderBytes; }
    [[nodiscard]] std::size_t size() const { return size_; }
    [[nodiscard]] int fd() const { return fd_.get(); }
    [[nodiscard]] std::uint64_t region_id() const { return region_id_; }
    // Gives the data pages back to the system; the mapping stays valid and reads zeros until
    // written again.
    void release_pages() const;

  private:
    SharedMemory(std::byte* base, std::size_t size, FileDescriptor fd, std::uint64_t region_id)
        : base_(base), size_(size), fd_(std::move(fd)), region_id_(region_id) {}
    std::byte* base_;
    std::size_t size_;
    FileDescriptor fd_;  // kept open: readers reach the region through /proc/<pid>/fd/<fd>
    std::uint64_t region_id_;
};

// A reader's read-only mapping of another process's SharedMemory.
class PeerMapping {
  public:
    // unavailable when the region is gone: the process exited, closed the region or reused the
    // descriptor (the header's region id differs).
    [[nodiscard]] static Result<std::unique_ptr<PeerMapping>> open(std::int64_t pid,
                                                                   std::int64_t fd,
                                                                   std::uint64_t region_id);
    PeerMapping(const PeerMapping&) = delete;
    PeerMapping& operator=(const PeerMapping&) = delete;
    ~PeerMapping();

    [[nodiscard]] const std::byte* data() const { return base_ + kSharedHeaderBytes; }
    [[nodiscard]] std::size_t size() const { return size_; }

  private:
    PeerMapping(const std::byte* base, std::size_t size) : base_(base), size_(size) {}
    const std::byte* base_;
    std::size_t size_;
};

// This process's pid namespace (the inode of /proc/self/ns/pid): a peer's /proc/<pid> names the
// same process only when both are equal.
[[nodiscard]] std::uint64_t pid_namespace_id();

}  // namespace omnirt::relay::ucx
