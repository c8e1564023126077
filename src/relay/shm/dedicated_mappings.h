#pragma once
// A receiver's mappings of its peers' dedicated segments, kept across transfers, so that a
// segment its sender reuses (dedicated_cache.h) costs no shm_open, fstat, mmap or page faults
// again. Keyed by segment name; an entry serves only metadata with the same segment id (a new
// process that got the old pid and names a new segment the same is mapped afresh). Claims check
// the generation of each use, so a cached mapping never reads an earlier or later payload.
//
// Bounded: at most `capacity_bytes` mapped and kMaxEntries entries; the least recently used go
// first. drop_retired() drops the entries of segments their sender retired (evicted, closed),
// forget_owner() those of a dead sender. Views hold their own reference to the segment, so
// dropping an entry never invalidates a view; the memory goes with the last reference.
//
// Thread safety: every member may be called from any thread.
#include <sys/types.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "core/error.h"
#include "relay/shm/dedicated.h"
#include "relay/shm/metadata.h"

namespace omnirt::relay::shm {

class DedicatedMappings {
  public:
    static constexpr std::size_t kMaxEntries = 64;

    explicit DedicatedMappings(std::uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
    DedicatedMappings(const DedicatedMappings&) = delete;
    DedicatedMappings& operator=(const DedicatedMappings&) = delete;

    // The cached mapping of the segment `metadata` names (same name, id and owner, not
    // retired), or null.
    [[nodiscard]] std::shared_ptr<DedicatedSegment> find(const TransferMetadata& metadata);
    // Maps the segment afresh (`populate` pre-faults it) and caches it when it fits, replacing
    // an entry of the same name. Errors of DedicatedSegment::open.
    [[nodiscard]] Result<std::shared_ptr<DedicatedSegment>> open(const TransferMetadata& metadata,
                                                                 bool populate);
    // Drops the entries of retired segments. Cheap: reads one flag per entry.
    void drop_retired();
    void forget_owner(pid_t owner);
    // Drops every entry; later mappings are not cached.
    void close();

    [[nodiscard]] std::size_t size() const;
    // Segments mapped so far (cache misses).
    [[nodiscard]] std::uint64_t opened() const;

  private:
    struct Entry {
        std::string name;
        std::shared_ptr<DedicatedSegment> segment;
    };
    using Entries = std::list<Entry>;
    // Moves the entries `drop` selects into `dropped`; caller holds mutex_.
    template <typename Predicate>
    void drop_if(Predicate drop, Entries& dropped);

    const std::uint64_t capacity_bytes_;
    mutable std::mutex mutex_;
    bool closed_ = false;
    Entries entries_;  // most recently used first
    std::uint64_t bytes_ = 0;
    std::uint64_t opened_ = 0;
};

}  // namespace omnirt::relay::shm
