#pragma once
// One posted payload of a sender, a pool slot or a dedicated segment, as its put operation
// and the sender's request table share it. Waiting and aborting follow the state machines of
// pool.h and dedicated.h, for the transfer's own generation. A dedicated transfer drops its
// lease on the segment as soon as it is seen finished or aborted, so that the segment goes back
// to the sender's cache (dedicated_cache.h) even before cleanup(request_id).
//
// Thread safety: every member may be called from any thread.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "relay/relay.h"
#include "relay/shm/dedicated.h"
#include "relay/shm/pool.h"

namespace omnirt::relay::shm {

// now + timeout, saturating, so that Duration::max() means "wait forever".
[[nodiscard]] std::chrono::steady_clock::time_point deadline_after(Duration timeout);

class Transfer {
  public:
    Transfer(std::shared_ptr<Pool> pool, SlotTicket ticket)
        : pool_(std::move(pool)), ticket_(ticket) {}
    // `dedicated` is a lease from the sender's DedicatedCache, posted for `generation`.
    Transfer(std::shared_ptr<DedicatedSegment> dedicated, std::uint32_t generation)
        : generation_(generation), dedicated_(std::move(dedicated)) {}

    [[nodiscard]] bool is_dedicated() const { return pool_ == nullptr; }
    // The receiver has finished reading (or the sender freed the memory).
    [[nodiscard]] bool finished() const;
    // Makes waits fail with aborted and gives the memory back as soon as no reader holds it
    // (a dedicated segment a reader still holds is retired by the cache). Idempotent.
    void abort();
    // Blocks until finished (or, with `until_claimed`, until a reader has claimed it):
    // deadline_exceeded, aborted, or unavailable when the reader died.
    [[nodiscard]] Status wait(Duration timeout, Duration liveness_interval,
                              bool until_claimed = false);
    // finished(), dropping a finished dedicated segment's lease (may munmap: call it without
    // holding locks).
    bool release_if_finished();

  private:
    [[nodiscard]] std::shared_ptr<DedicatedSegment> dedicated() const;
    void drop_dedicated();

    std::shared_ptr<Pool> pool_;
    SlotTicket ticket_;
    std::uint32_t generation_ = 0;  // of the dedicated segment's use
    mutable std::mutex mutex_;
    std::shared_ptr<DedicatedSegment> dedicated_;  // null once finished and dropped
    std::atomic<bool> aborted_{false};
    std::atomic<bool> reader_died_{false};
};

}  // namespace omnirt::relay::shm
