#pragma once
// The shm relay backend: moves tensors between processes of one host through POSIX shared
// memory (communication.md, "Backends").
//
// Each relay owns a pool of `credits` slots of `slot_bytes` in one segment; a payload that
// fits a slot takes one credit, which comes back when the receiver has copied it out or
// dropped its zero-copy view. A sender out of credits waits (backpressure), it does not fail.
// A larger payload gets a dedicated segment of its own, which the sender keeps and reuses for
// later payloads of its size class once the receiver is done with it (a bounded cache), and
// which receivers keep mapped. allocate_send_buffer hands out a slot (or a dedicated segment)
// to write into, so that its put_async moves no bytes. Receivers map each peer pool once.
// Segments are unlinked on close, when evicted from the cache, when a peer died, on cleanup
// when the cache does not keep them, and a new relay removes segments whose owner process no
// longer exists (segment.h has the names).
//
// Metadata, layouts and the slot protocol: metadata.h, pool.h, dedicated.h, dedicated_cache.h.
//
// Thread safety: as Relay. put_async and allocate_send_buffer block while out of credits;
// get_async copies on the calling thread in copy mode.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "relay/relay.h"
#include "relay/shm/dedicated_cache.h"
#include "relay/shm/segment.h"

namespace omnirt::relay {

namespace shm {
class Sender;
class Receiver;
}  // namespace shm

// Knobs beyond RelayOptions; the defaults suit production.
struct ShmTuning {
    // How long put_async and allocate_send_buffer wait for a credit before deadline_exceeded.
    Duration credit_wait = std::chrono::minutes(5);
    // How often a waiting sender checks whether the process reading its memory died.
    Duration liveness_interval = std::chrono::milliseconds(200);
    // Idle dedicated segments a sender keeps for reuse, and bytes of peers' dedicated segments
    // a receiver keeps mapped; 0 gives every large payload a new segment and mapping. Unset:
    // OMNIRT_SHM_DEDICATED_CACHE_MB, else 1 GiB.
    std::optional<std::uint64_t> dedicated_cache_bytes;
};

// Dedicated-segment reuse, both halves of one relay.
struct ShmDedicatedStats {
    shm::DedicatedStats sender;
    std::size_t receiver_mappings = 0;           // peers' segments kept mapped
    std::uint64_t receiver_mappings_opened = 0;  // segments mapped so far (cache misses)
};

class ShmRelay final : public Relay {
  public:
    // Removes stale segments of dead processes, then creates and pre-faults the pool.
    // invalid_argument for bad slot size or credits; resource_exhausted when /dev/shm is full.
    [[nodiscard]] static Result<std::unique_ptr<ShmRelay>> create(const RelayOptions& options,
                                                                  ShmTuning tuning = {});
    ~ShmRelay() override;

    [[nodiscard]] std::string_view backend() const override { return "shm"; }
    [[nodiscard]] Capabilities capabilities() const override;
    [[nodiscard]] Result<Tensor> allocate_send_buffer(std::size_t nbytes) override;
    [[nodiscard]] Result<std::unique_ptr<PutOperation>> put_async(
        const Tensor& tensor, const std::string& request_id,
        std::optional<std::int64_t> dst_rank = std::nullopt) override;
    [[nodiscard]] Result<std::unique_ptr<GetOperation>> get_async(
        const Value& metadata, Tensor dest, const std::string& request_id) override;
    void cleanup(const std::string& request_id) override;
    void close() override;

    // The name of this relay's pool segment ("/omnirt....").
    [[nodiscard]] const std::string& pool_segment() const { return pool_segment_; }
    // Peer pools this relay has mapped as a receiver.
    [[nodiscard]] std::size_t mapped_peer_pools() const;
    // put_async and allocate_send_buffer calls now waiting for a credit.
    [[nodiscard]] std::size_t blocked_senders() const;
    [[nodiscard]] ShmDedicatedStats dedicated_stats() const;

  private:
    ShmRelay(std::string name, std::shared_ptr<shm::Sender> sender,
             std::shared_ptr<shm::Receiver> receiver);
    [[nodiscard]] Status check_open() const;

    std::string name_;
    std::string pool_segment_;
    std::shared_ptr<shm::Sender> sender_;
    std::shared_ptr<shm::Receiver> receiver_;
    std::atomic<bool> closed_{false};
};

// Registers the factory "shm" with the relay registry. Idempotent and thread-safe.
[[nodiscard]] Status register_shm_backend();
[[nodiscard]] Result<std::unique_ptr<Relay>> create_shm_relay(const RelayOptions& options);

}  // namespace omnirt::relay
