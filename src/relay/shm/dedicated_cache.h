#pragma once
// The dedicated segments of one sender, kept for reuse, so that a payload larger than a slot
// costs no shm_open, fallocate, mmap or page faults on either side once its size was seen.
//
// acquire() hands out an idle segment of the payload's size class (eighth-octave classes: at
// most 12.5% slack) or creates one. The pointer it returns is a lease: when its last copy goes
// (the transfer finished or was aborted, and no send-buffer tensor refers to it any more) the
// segment comes back. An idle one (done or aborted: no reader holds it) is kept while the idle
// segments fit `capacity_bytes`, the least recently returned going first; anything else is
// retired: a segment a reader still holds (a zero-copy view of a transfer the sender cleaned
// up, a reader that died), one larger than the cap, every segment once the cache is closed.
// Retiring unlinks the name and marks the header, so receivers drop their mappings; the memory
// itself goes when the last mapping (a view) does. A cap of 0 gives every payload a new segment.
//
// Thread safety: every member may be called from any thread. Leases may be dropped on any
// thread, also after close() and after the cache itself is gone.
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "relay/shm/dedicated.h"

namespace omnirt::relay::shm {

// 1 GiB of idle segments per sender unless OMNIRT_SHM_DEDICATED_CACHE_MB says otherwise.
[[nodiscard]] std::uint64_t default_dedicated_cache_bytes();

struct DedicatedStats {
    std::uint64_t created = 0;  // segments created
    std::uint64_t reused = 0;   // payloads that took an idle segment
    std::size_t idle_segments = 0;
    std::uint64_t idle_bytes = 0;
};

class DedicatedCache : public std::enable_shared_from_this<DedicatedCache> {
  public:
    // A segment in state writing, for one payload.
    struct Lease {
        std::shared_ptr<DedicatedSegment> segment;
        std::uint32_t generation = 0;
    };
    using NameSource = std::function<std::string()>;

    // `next_name` names new segments (segment.h's scheme, so that stale-segment removal knows
    // them).
    [[nodiscard]] static std::shared_ptr<DedicatedCache> create(NameSource next_name,
                                                                std::uint64_t capacity_bytes);
    DedicatedCache(const DedicatedCache&) = delete;
    DedicatedCache& operator=(const DedicatedCache&) = delete;
    ~DedicatedCache();

    // A segment with room for `nbytes`: resource_exhausted when /dev/shm is full even after
    // dropping the idle segments, failed_precondition after close().
    [[nodiscard]] Result<Lease> acquire(std::uint64_t nbytes);
    // Retires every segment, idle or leased (leased ones keep their mapping until returned).
    void close();
    [[nodiscard]] DedicatedStats stats() const;

    // The payload capacity a segment for `nbytes` gets.
    [[nodiscard]] static std::uint64_t size_class(std::uint64_t nbytes);

  private:
    DedicatedCache(NameSource next_name, std::uint64_t capacity_bytes)
        : next_name_(std::move(next_name)), capacity_bytes_(capacity_bytes) {}
    [[nodiscard]] std::shared_ptr<DedicatedSegment> lease(
        std::shared_ptr<DedicatedSegment> segment);
    void give_back(std::shared_ptr<DedicatedSegment> segment);
    // Retires every idle segment; returns how many.
    std::size_t drop_idle();

    const NameSource next_name_;
    const std::uint64_t capacity_bytes_;
    mutable std::mutex mutex_;
    bool closed_ = false;
    std::list<std::shared_ptr<DedicatedSegment>> idle_;  // most recently returned first
    std::uint64_t idle_bytes_ = 0;
    std::vector<std::weak_ptr<DedicatedSegment>> all_;  // every live segment, for close()
    DedicatedStats counts_;
};

}  // namespace omnirt::relay::shm
