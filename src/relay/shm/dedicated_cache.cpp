#include "relay/shm/dedicated_cache.h"

#include <algorithm>
#include <bit>
#include <cstdlib>

namespace omnirt::relay::shm {
namespace {

constexpr std::uint64_t kDefaultCacheBytes = std::uint64_t{1} << 30;

std::uint64_t round_up(std::uint64_t value, std::uint64_t unit) {
    return (value + unit - 1) / unit * unit;
}

}  // namespace

std::uint64_t default_dedicated_cache_bytes() {
    if (const char* configured = std::getenv("OMNIRT_SHM_DEDICATED_CACHE_MB")) {
        return std::strtoull(configured, nullptr, 10) << 20;
    }
    return kDefaultCacheBytes;
}

std::uint64_t DedicatedCache::size_class(std::uint64_t nbytes) {
    const std::uint64_t pages = round_up(std::max<std::uint64_t>(nbytes, 1), kPageBytes);
    if (pages <= 8 * kPageBytes) return pages;
    return round_up(pages, std::bit_floor(pages) / 8);
}

std::shared_ptr<DedicatedCache> DedicatedCache::create(NameSource next_name,
                                                       std::uint64_t capacity_bytes) {
    return std::shared_ptr<DedicatedCache>(
        new DedicatedCache(std::move(next_name), capacity_bytes));
}

DedicatedCache::~DedicatedCache() { close(); }

Result<DedicatedCache::Lease> DedicatedCache::acquire(std::uint64_t nbytes) {
    const std::uint64_t capacity = size_class(nbytes);
    std::shared_ptr<DedicatedSegment> segment;
    {
        std::lock_guard lock(mutex_);
        if (closed_) {
            return fail(ErrorCode::failed_precondition, "shm dedicated segments are closed");
        }
        for (auto it = idle_.begin(); it != idle_.end(); ++it) {
            if ((*it)->capacity() != capacity) continue;
            segment = std::move(*it);
            idle_bytes_ -= segment->segment().size();
            idle_.erase(it);
            ++counts_.reused;
            break;
        }
    }
    if (segment) {
        auto generation = segment->begin_write();
        OMNI_CHECK(generation.has_value(), "shm relay cached a dedicated segment that is in use");
        return Lease{lease(std::move(segment)), *generation};
    }
    auto created = DedicatedSegment::create(next_name_(), capacity, random_id());
    if (!created && created.error().code == ErrorCode::resource_exhausted && drop_idle() > 0) {
        created = DedicatedSegment::create(next_name_(), capacity, random_id());  // /dev/shm full
    }
    OMNI_TRY(segment, std::move(created));
    {
        std::lock_guard lock(mutex_);
        if (!closed_) {
            std::erase_if(all_, [](const auto& weak) { return weak.expired(); });
            all_.push_back(segment);
            ++counts_.created;
        }
    }
    // Created while closing: the lease retires it when it goes (give_back sees closed_).
    return Lease{lease(std::move(segment)), 1};
}

std::shared_ptr<DedicatedSegment> DedicatedCache::lease(std::shared_ptr<DedicatedSegment> owned) {
    DedicatedSegment* segment = owned.get();
    return std::shared_ptr<DedicatedSegment>(
        segment, [cache = weak_from_this(), owned = std::move(owned)](DedicatedSegment*) mutable {
            if (auto self = cache.lock()) {
                self->give_back(std::move(owned));
            } else {
                owned->retire();
            }
        });
}

void DedicatedCache::give_back(std::shared_ptr<DedicatedSegment> segment) {
    std::vector<std::shared_ptr<DedicatedSegment>> retired;  // unmapped outside the lock
    {
        std::lock_guard lock(mutex_);
        const std::uint64_t bytes = segment->segment().size();
        if (closed_ || bytes > capacity_bytes_ || !segment->idle()) {
            retired.push_back(std::move(segment));
        } else {
            idle_.push_front(std::move(segment));
            idle_bytes_ += bytes;
            while (idle_bytes_ > capacity_bytes_) {
                idle_bytes_ -= idle_.back()->segment().size();
                retired.push_back(std::move(idle_.back()));
                idle_.pop_back();
            }
        }
    }
    for (const auto& dropped : retired) dropped->retire();
}

std::size_t DedicatedCache::drop_idle() {
    std::vector<std::shared_ptr<DedicatedSegment>> segments;
    {
        std::lock_guard lock(mutex_);
        segments.assign(std::make_move_iterator(idle_.begin()),
                        std::make_move_iterator(idle_.end()));
        idle_.clear();
        idle_bytes_ = 0;
    }
    for (const auto& segment : segments) segment->retire();
    return segments.size();
}

void DedicatedCache::close() {
    std::vector<std::shared_ptr<DedicatedSegment>> segments;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        segments.assign(std::make_move_iterator(idle_.begin()),
                        std::make_move_iterator(idle_.end()));
        idle_.clear();
        idle_bytes_ = 0;
        for (const auto& weak : all_) {
            if (auto leased = weak.lock()) segments.push_back(std::move(leased));
        }
        all_.clear();
    }
    for (const auto& segment : segments) segment->retire();
}

DedicatedStats DedicatedCache::stats() const {
    std::lock_guard lock(mutex_);
    DedicatedStats stats = counts_;
    stats.idle_segments = idle_.size();
    stats.idle_bytes = idle_bytes_;
    return stats;
}

}  // namespace omnirt::relay::shm
