#pragma once
// The sending half of an shm relay: owns the relay's credit pool and the cache of dedicated
// segments for payloads larger than a slot (dedicated_cache.h), hands out send buffers that
// are slots or dedicated segments, and tracks transfers by request so that cleanup and close
// can abort them.
//
// Thread safety: every member may be called from any thread. put() blocks while the pool is
// out of credits (backpressure), up to `credit_wait`.
#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "relay/relay.h"
#include "relay/shm/dedicated.h"
#include "relay/shm/dedicated_cache.h"
#include "relay/shm/pool.h"
#include "relay/shm/transfer.h"

namespace omnirt::relay::shm {

struct SenderOptions {
    std::string instance;    // sanitized instance tag
    std::string relay_name;  // sanitized relay name
    std::uint64_t slot_bytes = 0;
    std::int64_t credits = 0;
    Duration credit_wait{};
    // How often a waiting sender checks whether a reader holding its memory has died.
    Duration liveness_interval{};
    // Idle dedicated segments kept for reuse, in bytes (0: a new segment per payload).
    std::uint64_t dedicated_cache_bytes = 0;
};

class Sender : public std::enable_shared_from_this<Sender> {
  public:
    [[nodiscard]] static Result<std::shared_ptr<Sender>> create(SenderOptions options);
    Sender(const Sender&) = delete;
    Sender& operator=(const Sender&) = delete;
    ~Sender();

    [[nodiscard]] Result<Tensor> allocate_send_buffer(std::size_t nbytes);
    [[nodiscard]] Result<std::unique_ptr<PutOperation>> put(const Tensor& tensor,
                                                            const std::string& request_id);
    void cleanup(const std::string& request_id);
    void close();

    [[nodiscard]] const std::string& pool_name() const { return pool_->segment()->name(); }
    // Calls currently waiting for a credit.
    [[nodiscard]] std::size_t blocked_senders() const {
        std::lock_guard lock(mutex_);
        return credit_waiters_.size();
    }
    [[nodiscard]] DedicatedStats dedicated_stats() const { return dedicated_->stats(); }

  private:
    // An outstanding allocate_send_buffer() result, keyed by its storage's data pointer.
    struct SendBuffer {
        const Storage* storage = nullptr;
        std::uint64_t serial = 0;
        std::optional<SlotTicket> ticket;
        std::shared_ptr<DedicatedSegment> dedicated;  // a lease from dedicated_
        std::uint32_t generation = 0;                 // of the dedicated segment
    };
    // A put() waiting for a credit; cleanup and close flag it.
    struct CreditWaiter {
        const std::string* request_id;
        bool aborted = false;
    };

    Sender(SenderOptions options, std::shared_ptr<Pool> pool);
    // A dedicated segment for `nbytes`, after returning the finished ones to the cache.
    [[nodiscard]] Result<DedicatedCache::Lease> acquire_dedicated(std::uint64_t nbytes);
    // Drops the leases of dedicated transfers that receivers have finished (may munmap: call
    // it without holding mutex_).
    void release_finished_dedicated();
    [[nodiscard]] Result<SlotTicket> acquire_slot(const std::string& request_id);
    [[nodiscard]] Status check_open() const;  // caller holds mutex_
    void drop_send_buffer(const std::byte* data, std::uint64_t serial);
    // Takes the send buffer `tensor` lives in out of the table, if it is one.
    [[nodiscard]] std::optional<SendBuffer> take_send_buffer(const Tensor& tensor);
    [[nodiscard]] Result<std::unique_ptr<PutOperation>> publish(std::shared_ptr<Transfer> transfer,
                                                                Value metadata,
                                                                const std::string& request_id);
    void prune_finished();  // caller holds mutex_

    SenderOptions options_;
    std::shared_ptr<Pool> pool_;
    std::shared_ptr<DedicatedCache> dedicated_;

    mutable std::mutex mutex_;
    bool closed_ = false;
    std::uint64_t next_buffer_serial_ = 0;
    std::unordered_map<const std::byte*, SendBuffer> send_buffers_;
    std::unordered_map<std::string, std::vector<std::shared_ptr<Transfer>>> requests_;
    std::size_t tracked_transfers_ = 0;
    std::size_t prune_threshold_ = 0;
    // Dedicated transfers not yet seen finished, whose leases go back once they are.
    std::vector<std::shared_ptr<Transfer>> open_dedicated_;
    std::list<CreditWaiter*> credit_waiters_;
};

}  // namespace omnirt::relay::shm
