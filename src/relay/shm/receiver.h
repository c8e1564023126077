#pragma once
// The receiving half of an shm relay: maps each peer's pool once (a cache keyed by segment
// name) and keeps its mappings of peers' dedicated segments (dedicated_mappings.h), validates
// metadata against the mapped segment, and either copies into a destination or hands out a
// read-only view whose release returns the sender's credit (or dedicated segment).
//
// Sender death: a transfer in memory the receiver has mapped before is read without asking
// whether its sender lives (what it posted is complete either way); the question is asked, off
// the get's latency path, when the transfer is released (after the copy, or when the view goes),
// and before mapping anything new or reporting a refusal. A dead sender's mappings go and its
// segments are unlinked.
//
// Thread safety: every member may be called from any thread. get() copies on the calling
// thread before it returns (copy mode); zero-copy gets never touch the payload. Owned by a
// shared_ptr (views refer back to it weakly).
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "relay/relay.h"
#include "relay/shm/dedicated_mappings.h"
#include "relay/shm/metadata.h"
#include "relay/shm/pool.h"

namespace omnirt::relay::shm {

struct ReceiverOptions {
    std::string relay_name;
    bool zero_copy = false;
    // Bytes of peers' dedicated segments kept mapped across transfers (0: map per transfer).
    std::uint64_t dedicated_mapping_bytes = 0;
};

class Receiver : public std::enable_shared_from_this<Receiver> {
  public:
    explicit Receiver(ReceiverOptions options)
        : options_(std::move(options)), dedicated_(options_.dedicated_mapping_bytes) {}
    Receiver(const Receiver&) = delete;
    Receiver& operator=(const Receiver&) = delete;

    [[nodiscard]] Result<std::unique_ptr<GetOperation>> get(const Value& metadata, Tensor dest,
                                                            const std::string& request_id);
    void cleanup(const std::string& request_id);
    void close();
    // Peer pools currently mapped (for tests and stats).
    [[nodiscard]] std::size_t mapped_pools() const;
    [[nodiscard]] const DedicatedMappings& dedicated_mappings() const { return dedicated_; }

    // The state a get operation shares with the receiver, so cleanup can abort it.
    struct GetState {
        std::mutex mutex;
        bool aborted = false;
        Tensor tensor;
    };

  private:
    [[nodiscard]] Result<std::shared_ptr<Pool>> pool_for(const TransferMetadata& metadata);
    [[nodiscard]] Result<Tensor> read_slot(const TransferMetadata& metadata, Tensor dest);
    [[nodiscard]] Result<Tensor> read_dedicated(const TransferMetadata& metadata, Tensor dest);
    // Forgets the pools of a dead sender and unlinks its segments.
    void forget_owner(pid_t owner);
    // unavailable, after forget_owner, when the sender of `metadata` is dead. A system call:
    // only for new mappings and refused transfers, not on the hot path.
    [[nodiscard]] Status check_sender_alive(const TransferMetadata& metadata);
    // After a transfer of `owner` was released: forgets the owner if it died meanwhile.
    static void forget_if_dead(const std::weak_ptr<Receiver>& receiver, pid_t owner);
    [[nodiscard]] bool zero_copy_into(const Tensor& dest) const {
        return options_.zero_copy && !dest.defined();
    }

    ReceiverOptions options_;
    mutable std::mutex mutex_;
    bool closed_ = false;
    std::unordered_map<std::string, std::shared_ptr<Pool>> pools_;
    DedicatedMappings dedicated_;
    std::unordered_map<std::string, std::vector<std::weak_ptr<GetState>>> pending_;
    std::size_t tracked_gets_ = 0;
    std::size_t prune_threshold_ = 1024;
};

}  // namespace omnirt::relay::shm
