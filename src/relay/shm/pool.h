#pragma once
// The credit pool of one shm relay: a POSIX shared-memory segment with a header, a table of
// slot control words and `credits` slots of `slot_bytes` each. The owner (sender) creates it;
// receivers attach to it by name, once, and validate the header against fstat's size.
//
// Layout (all offsets from the segment start; every slot starts on a page):
//   [0, 64)                      PoolHeader: magic, version, owner pid, pool id, geometry
//   [64, 128)                    PoolHeader signals: closed, credit_signal, waiter counters
//   [128, 128 + 64 * credits)    SlotControl per slot: word, reader pid, posted offset/nbytes
//   [data_offset + i * stride)   slot i, stride = slot_bytes rounded up to a page
//
// Slot word (a futex word): generation << 3 | abandoned << 2 | state, state one of
//   free ──acquire(gen+1)──▶ writing ──post──▶ posted ──claim──▶ claimed ──release──▶ free
//   writing ──cancel──▶ free (a send buffer dropped without put)
//   posted ──abandon──▶ free; claimed ──abandon──▶ claimed|abandoned (sender cleanup; the
//   receiver still frees it when done); claimed ──reclaim──▶ free (the reader process died).
// Only the state machine's owner side makes each move: the sender acquires, posts, cancels,
// abandons and reclaims; a receiver claims and releases. Every move is a CAS on the word that
// checks the generation, so metadata of an earlier use of a slot can never touch a later one.
// Data written before `post` (release) is visible after `claim` (acquire).
//
// Waiting: senders out of credit sleep on credit_signal, which every release, cancel, abandon
// and reclaim bumps; put operations sleep on their slot's word. Both are shared futexes, woken
// only when the matching waiter counter is non-zero.
//
// Thread safety: every member may be called from any thread of any process mapping the pool.
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"
#include "relay/shm/segment.h"

namespace omnirt::relay::shm {

enum class SlotState : std::uint32_t { free = 0, writing = 1, posted = 2, claimed = 3 };

struct SlotWord {
    static constexpr std::uint32_t kGenerationMask = (1u << 29) - 1;
    static constexpr std::uint32_t kAbandoned = 1u << 2;
    static std::uint32_t make(std::uint32_t generation, SlotState state, bool abandoned = false) {
        return (generation & kGenerationMask) << 3 | (abandoned ? kAbandoned : 0) |
               static_cast<std::uint32_t>(state);
    }
    static std::uint32_t generation(std::uint32_t word) { return word >> 3; }
    static SlotState state(std::uint32_t word) { return static_cast<SlotState>(word & 3u); }
    static bool abandoned(std::uint32_t word) { return (word & kAbandoned) != 0; }
};

// Geometry of a pool, validated; receivers keep their own copy and never re-read the header's.
struct PoolGeometry {
    std::uint32_t slot_count = 0;
    std::uint64_t slot_bytes = 0;
    std::uint64_t slot_stride = 0;
    std::uint64_t data_offset = 0;
    std::uint64_t segment_bytes = 0;

    [[nodiscard]] static Result<PoolGeometry> compute(std::uint64_t slot_bytes,
                                                      std::int64_t credits);
    [[nodiscard]] std::uint64_t slot_begin(std::uint32_t slot) const {
        return data_offset + slot * slot_stride;
    }
};

struct SlotTicket {
    std::uint32_t slot = 0;
    std::uint32_t generation = 0;
};

class Pool {
  public:
    // Creates, initializes and pre-faults the pool of this process.
    [[nodiscard]] static Result<std::shared_ptr<Pool>> create(const std::string& name,
                                                              std::uint64_t slot_bytes,
                                                              std::int64_t credits,
                                                              std::uint64_t pool_id);
    // Maps a peer's pool and validates its header: data_loss for a corrupted header,
    // invalid_argument when owner pid or pool id differ from the expected ones.
    [[nodiscard]] static Result<std::shared_ptr<Pool>> attach(const std::string& name,
                                                              pid_t expected_owner,
                                                              std::uint64_t expected_pool_id);

    [[nodiscard]] const PoolGeometry& geometry() const { return geometry_; }
    [[nodiscard]] std::uint64_t pool_id() const { return pool_id_; }
    [[nodiscard]] pid_t owner_pid() const { return owner_pid_; }
    [[nodiscard]] const std::shared_ptr<Segment>& segment() const { return segment_; }
    [[nodiscard]] std::byte* slot_data(std::uint32_t slot) const {
        return segment_->data() + geometry_.slot_begin(slot);
    }
    // The slot whose data starts at `data`, if any.
    [[nodiscard]] std::optional<std::uint32_t> slot_at(const std::byte* data) const;

    // Sender side.
    [[nodiscard]] std::optional<SlotTicket> try_acquire();
    void post(SlotTicket ticket, std::uint64_t offset, std::uint64_t nbytes);
    // writing -> free; false when the slot is no longer in that state.
    bool cancel_write(SlotTicket ticket);
    // Sender cleanup of a posted or claimed transfer (see the state machine above).
    void abandon(SlotTicket ticket);
    // Frees claimed slots whose reader process died; true when one was freed.
    bool reclaim_from_dead_readers();
    // True once the receiver released (or the sender freed) the slot's `generation`.
    [[nodiscard]] bool finished(SlotTicket ticket) const;
    [[nodiscard]] std::uint32_t word(std::uint32_t slot) const;
    [[nodiscard]] pid_t reader_pid(std::uint32_t slot) const;
    [[nodiscard]] std::uint32_t credit_signal() const;
    void wait_for_credit(std::uint32_t observed_signal, std::chrono::nanoseconds timeout);
    void wait_for_word_change(std::uint32_t slot, std::uint32_t observed_word,
                              std::chrono::nanoseconds timeout);
    // Wakes credit waiters so they re-check abort and close flags.
    void signal_credit();
    void mark_closed();

    // Receiver side. claim: posted -> claimed for `ticket` when the posted offset and size
    // match; errors say why not (stale generation, consumed, cleaned up, not yet posted).
    [[nodiscard]] Status claim(SlotTicket ticket, std::uint64_t offset, std::uint64_t nbytes);
    // claimed -> free, waking the sender.
    void release(SlotTicket ticket);
    [[nodiscard]] bool closed() const;

  private:
    struct Header;
    struct SlotControl;
    Pool(std::shared_ptr<Segment> segment, PoolGeometry geometry, std::uint64_t pool_id,
         pid_t owner_pid);
    [[nodiscard]] Header& header() const;
    [[nodiscard]] SlotControl& control(std::uint32_t slot) const;
    void wake_slot(std::uint32_t slot);

    std::shared_ptr<Segment> segment_;
    PoolGeometry geometry_;
    std::uint64_t pool_id_;
    pid_t owner_pid_;
    std::atomic<std::uint32_t> acquire_hint_{0};
};

}  // namespace omnirt::relay::shm
