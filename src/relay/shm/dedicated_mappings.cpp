#include "relay/shm/dedicated_mappings.h"

#include <algorithm>
#include <vector>

namespace omnirt::relay::shm {

template <typename Predicate>
void DedicatedMappings::drop_if(Predicate drop, Entries& dropped) {
    for (auto it = entries_.begin(); it != entries_.end();) {
        auto next = std::next(it);
        if (drop(*it)) {
            bytes_ -= it->segment->segment().size();
            dropped.splice(dropped.end(), entries_, it);
        }
        it = next;
    }
}

std::shared_ptr<DedicatedSegment> DedicatedMappings::find(const TransferMetadata& metadata) {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& entry) {
        return entry.name == metadata.segment &&
               entry.segment->segment_id() == metadata.segment_id &&
               entry.segment->owner_pid() == metadata.owner_pid;
    });
    if (it == entries_.end() || it->segment->retired()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it);
    return entries_.front().segment;
}

Result<std::shared_ptr<DedicatedSegment>> DedicatedMappings::open(const TransferMetadata& metadata,
                                                                  bool populate) {
    OMNI_TRY(auto segment, DedicatedSegment::open(metadata.segment, metadata.owner_pid,
                                                  metadata.segment_id, populate));
    Entries dropped;  // unmapped outside the lock
    std::lock_guard lock(mutex_);
    ++opened_;
    const std::uint64_t bytes = segment->segment().size();
    if (closed_ || bytes > capacity_bytes_) return segment;
    // An entry of the same name: another incarnation (a stale entry never matches find), or
    // the same segment mapped meanwhile by another thread.
    drop_if([&](const Entry& entry) { return entry.name == metadata.segment; }, dropped);
    // The cold path also forgets senders that died without retiring their segments.
    std::vector<pid_t> dead;
    for (const auto& entry : entries_) {
        const pid_t owner = entry.segment->owner_pid();
        if (std::find(dead.begin(), dead.end(), owner) == dead.end() && !process_alive(owner)) {
            dead.push_back(owner);
        }
    }
    drop_if(
        [&](const Entry& entry) {
            return std::find(dead.begin(), dead.end(), entry.segment->owner_pid()) != dead.end();
        },
        dropped);
    entries_.push_front(Entry{.name = metadata.segment, .segment = segment});
    bytes_ += bytes;
    while (bytes_ > capacity_bytes_ || entries_.size() > kMaxEntries) {
        bytes_ -= entries_.back().segment->segment().size();
        dropped.splice(dropped.end(), entries_, std::prev(entries_.end()));
    }
    return segment;
}

void DedicatedMappings::drop_retired() {
    Entries dropped;
    std::lock_guard lock(mutex_);
    if (entries_.empty()) return;
    drop_if([](const Entry& entry) { return entry.segment->retired(); }, dropped);
}

void DedicatedMappings::forget_owner(pid_t owner) {
    Entries dropped;
    std::lock_guard lock(mutex_);
    drop_if([owner](const Entry& entry) { return entry.segment->owner_pid() == owner; }, dropped);
}

void DedicatedMappings::close() {
    Entries dropped;
    std::lock_guard lock(mutex_);
    closed_ = true;
    dropped.swap(entries_);
    bytes_ = 0;
}

std::size_t DedicatedMappings::size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

std::uint64_t DedicatedMappings::opened() const {
    std::lock_guard lock(mutex_);
    return opened_;
}

}  // namespace omnirt::relay::shm
