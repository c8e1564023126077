#pragma once
// A dedicated segment carries one payload larger than a pool slot. The sender creates it per
// transfer; the receiver maps it, claims it, reads it (or hands out a view), marks it done and
// unlinks the name, so that a crash of the sender after that leaves nothing behind; the
// sender unlinks it too when it sees it done or cleans it up, and drops its mapping then.
//
// Layout: [0, 128) header (magic, version, owner pid, posted offset and nbytes, state word,
// reader pid, waiter count); payload space from kPageBytes. The sender posts the offset and size
// of what it wrote (a send buffer may be a sub-view), and the receiver checks the metadata
// against them and against fstat's size.
//
// State word (a futex word): writing ──post──▶ posted ──claim──▶ claimed ──release──▶ done;
// writing/posted ──abort──▶ aborted; claimed ──abort──▶ claimed|abandoned (the reader still
// marks it done). As in the pool, the sender makes every move but claim and release.
//
// Thread safety: every member may be called from any thread of any process mapping it.
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"
#include "relay/shm/segment.h"

namespace omnirt::relay::shm {

enum class DedicatedState : std::uint32_t { writing, posted, claimed, done, aborted };

class DedicatedSegment {
public:
    static constexpr std::uint32_t kAbandoned = 1u << 8;

    // Sender: a new segment `name` with room for `capacity` payload bytes, in state writing.
    [[nodiscard]] static Result<std::shared_ptr<DedicatedSegment>> create(const std::string& name,
                                                                          std::uint64_t capacity);
    // Receiver: maps `name` and checks magic, version and owner. `populate` pre-faults the
    // mapping (worth it when every byte will be copied).
    [[nodiscard]] static Result<std::shared_ptr<DedicatedSegment>> open(const std::string& name,
                                                                        pid_t expected_owner,
                                                                        bool populate);

    [[nodiscard]] static std::uint64_t payload_offset() { return kPageBytes; }
    [[nodiscard]] std::byte* payload() const { return segment_->data() + kPageBytes; }
    // Bytes at `offset` from the segment start (an offset claim() or post() checked).
    [[nodiscard]] std::byte* data_at(std::uint64_t offset) const {
        return segment_->data() + offset;
    }
    [[nodiscard]] Segment& segment() const { return *segment_; }

    [[nodiscard]] std::uint32_t state_word() const;
    [[nodiscard]] static DedicatedState state_of(std::uint32_t word) {
        return static_cast<DedicatedState>(word & 0xffu);
    }
    [[nodiscard]] pid_t reader_pid() const;
    void wait_for_change(std::uint32_t observed, std::chrono::nanoseconds timeout);

    // Sender side: publishes `nbytes` at `offset` (inside the payload space).
    void post(std::uint64_t offset, std::uint64_t nbytes);
    // Aborts a transfer nobody finished: writing/posted -> aborted, claimed -> abandoned.
    void abort();

    // Receiver side: posted -> claimed when the posted offset and size equal the metadata's
    // and fit the mapping, or why not (the segment stays posted then).
    [[nodiscard]] Status claim(std::uint64_t offset, std::uint64_t nbytes);
    // claimed -> done, waking the sender.
    void release();

private:
    struct Header;
    explicit DedicatedSegment(std::shared_ptr<Segment> segment) : segment_(std::move(segment)) {}
    [[nodiscard]] Header& header() const;
    void wake();

    std::shared_ptr<Segment> segment_;
};

}  // namespace omnirt::relay::shm
