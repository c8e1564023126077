#pragma once
// One posted payload of a sender, a pool slot or a dedicated segment, as its put operation
// and the sender's request table share it. Waiting and aborting follow the state machines of
// pool.h and dedicated.h.
//
// Thread safety: every member may be called from any thread.
#include <atomic>
#include <chrono>
#include <memory>

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
    explicit Transfer(std::shared_ptr<DedicatedSegment> dedicated)
        : dedicated_(std::move(dedicated)) {}

    // The receiver has finished reading (or the sender freed the memory).
    [[nodiscard]] bool finished() const;
    // Makes waits fail with aborted and gives the memory back as soon as no reader holds it;
    // unlinks a dedicated segment. Idempotent.
    void abort();
    // Blocks until finished: deadline_exceeded, aborted, or unavailable when the reader died.
    [[nodiscard]] Status wait(Duration timeout, Duration liveness_interval);

private:
    std::shared_ptr<Pool> pool_;
    SlotTicket ticket_;
    std::shared_ptr<DedicatedSegment> dedicated_;
    std::atomic<bool> aborted_{false};
};

}  // namespace omnirt::relay::shm
