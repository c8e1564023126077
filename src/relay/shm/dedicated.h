#pragma once
// A dedicated segment carries a payload larger than a pool slot. The sender keeps it after the
// transfer and reuses it for a later payload of the same size class (dedicated_cache.h);
// receivers keep their mapping of it across transfers (dedicated_mappings.h). Each use has a
// generation, carried by the metadata and by the state word, so metadata of an earlier use can
// never touch a later one.
//
// Layout: [0, 128) header (magic, version, owner pid, segment id, posted offset and nbytes,
// state word, reader pid, waiter count, retired flag); payload space from kPageBytes. The
// segment id is random per segment: a receiver that finds a cached mapping under the same name
// but another id (a new process reusing the pid) maps the name again. The sender posts the
// offset and size of what it wrote (a send buffer may be a sub-view), and the receiver checks
// the metadata against them and against fstat's size.
//
// State word (a futex word): generation << 4 | abandoned << 3 | state, state one of
//   writing ──post──▶ posted ──claim──▶ claimed ──release──▶ done
//   writing/posted ──abort──▶ aborted; claimed ──abort──▶ claimed|abandoned (the reader still
//   marks it done); done/aborted ──begin_write(gen+1)──▶ writing (reuse by the sender).
// As in the pool, the sender makes every move but claim and release, and every move checks the
// generation. A segment is idle (reusable) in done and aborted: no reader holds it then, and
// none can claim it (a claim needs posted with the exact generation).
//
// Retired: the sender will never post into the segment again (evicted from its cache, or the
// relay closed) and has unlinked the name; receivers drop their cached mapping when they see it.
//
// Thread safety: every member may be called from any thread of any process mapping it.
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

enum class DedicatedState : std::uint32_t { writing, posted, claimed, done, aborted };

struct DedicatedWord {
    static constexpr std::uint32_t kGenerationMask = (1u << 28) - 1;
    static constexpr std::uint32_t kAbandoned = 1u << 3;
    static std::uint32_t make(std::uint32_t generation, DedicatedState state,
                              bool abandoned = false) {
        return (generation & kGenerationMask) << 4 | (abandoned ? kAbandoned : 0) |
               static_cast<std::uint32_t>(state);
    }
    static std::uint32_t generation(std::uint32_t word) { return word >> 4; }
    static DedicatedState state(std::uint32_t word) {
        return static_cast<DedicatedState>(word & 7u);
    }
    static bool abandoned(std::uint32_t word) { return (word & kAbandoned) != 0; }
};

class DedicatedSegment {
  public:
    // Sender: a new segment `name` with room for `capacity` payload bytes, pre-faulted, in state
    // writing with generation 1.
    [[nodiscard]] static Result<std::shared_ptr<DedicatedSegment>> create(const std::string& name,
                                                                          std::uint64_t capacity,
                                                                          std::uint64_t segment_id);
    // Receiver: maps `name` and checks magic, version, owner and segment id (not_found when the
    // id differs: the name now belongs to another segment). `populate` pre-faults the mapping
    // (worth it when every byte will be copied).
    [[nodiscard]] static Result<std::shared_ptr<DedicatedSegment>> open(
        const std::string& name, pid_t expected_owner, std::uint64_t expected_segment_id,
        bool populate);

    [[nodiscard]] static std::uint64_t payload_offset() { return kPageBytes; }
    [[nodiscard]] std::byte* payload() const { return segment_->data() + kPageBytes; }
    [[nodiscard]] std::uint64_t capacity() const { return segment_->size() - kPageBytes; }
    // Bytes at `offset` from the segment start (an offset claim() or post() checked).
    [[nodiscard]] std::byte* data_at(std::uint64_t offset) const {
        return segment_->data() + offset;
    }
    [[nodiscard]] Segment& segment() const { return *segment_; }
    [[nodiscard]] std::uint64_t segment_id() const;
    [[nodiscard]] pid_t owner_pid() const;

    [[nodiscard]] std::uint32_t state_word() const;
    [[nodiscard]] pid_t reader_pid() const;
    void wait_for_change(std::uint32_t observed, std::chrono::nanoseconds timeout);

    // Sender side. begin_write: done/aborted -> writing with the next generation, which it
    // returns; nullopt when the segment is not idle.
    [[nodiscard]] std::optional<std::uint32_t> begin_write();
    // Publishes `nbytes` at `offset` (inside the payload space) for `generation`.
    void post(std::uint32_t generation, std::uint64_t offset, std::uint64_t nbytes);
    // Aborts `generation` if nobody finished it: writing/posted -> aborted, claimed -> abandoned.
    void abort(std::uint32_t generation);
    // done or aborted: reusable.
    [[nodiscard]] bool idle() const;
    // Marks the segment retired and unlinks its name. Idempotent.
    void retire();
    [[nodiscard]] bool retired() const;

    // Receiver side: posted -> claimed for `generation` when the posted offset and size equal
    // the metadata's and fit the mapping, or why not (the segment stays posted then).
    [[nodiscard]] Status claim(std::uint32_t generation, std::uint64_t offset,
                               std::uint64_t nbytes);
    // claimed -> done for `generation`, waking the sender.
    void release(std::uint32_t generation);

  private:
    struct Header;
    explicit DedicatedSegment(std::shared_ptr<Segment> segment) : segment_(std::move(segment)) {}
    [[nodiscard]] Header& header() const;
    void wake();

    std::shared_ptr<Segment> segment_;
};

}  // namespace omnirt::relay::shm
