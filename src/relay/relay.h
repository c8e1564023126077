#pragma once
// The relay: the data plane that moves one flat tensor buffer between stage processes
// (communication.md, "Relay Interface"). A backend only moves bytes and returns metadata another
// instance of the same backend can read; it never routes, merges or interprets payloads.
//
// Lifecycle of one transfer:
//   sender:   op = put_async(buffer, request_id, dst_rank)   // buffer now owned by the relay
//             send data_ready(op->metadata()) on the control plane   // control BEFORE wait
//             op->wait_for_completion(timeout)                // receiver has finished reading
//   receiver: get = get_async(metadata, dest, request_id)
//             get->wait_for_completion(timeout); tensor = get->tensor()
//             relay.cleanup(request_id) once the request leaves the stage
//
// Thread safety: every method of Relay may be called from any thread. Operations are used by
// one thread at a time. wait_for_completion blocks; never call it on an IO loop thread.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/tensor.h"
#include "core/value.h"

namespace omnirt::relay {

using Duration = std::chrono::milliseconds;

struct RelayOptions {
    std::string backend = "shm";
    // Unique per relay within a pipeline instance (the stage name, or "<stage>.<rank>"); part
    // of the names of OS resources the relay creates.
    std::string name;
    // The instance's runtime directory (config/runtime_dir.h): rendezvous files live there, and
    // its basename tags shared-memory segments so a later start can remove a killed instance's.
    std::string runtime_dir;
    Device device = Device::cpu();
    std::size_t slot_bytes = std::size_t{16} << 20;
    std::int64_t credits = 8;
    std::int64_t rank = 0;
    std::int64_t world_size = 1;
    std::string rendezvous;  // gloo / nccl: "file://<path>" or "tcp://host:port"
    // Receive side: hand out read-only views of the sender's memory instead of copying into the
    // destination; releasing the view returns the sender's credit.
    bool zero_copy = false;
};

struct Capabilities {
    bool zero_copy_receive = false;    // get_async can return views of the sender's memory
    bool cross_host = false;           // peers may be on other hosts
    bool needs_rank_topology = false;  // put_async needs dst_rank (gloo, nccl)
    bool device_memory = false;        // can move cuda tensors without staging on the host
    // A sender has a bounded number of transfers in flight (credits) and put_async blocks when
    // they are used up, until a receiver finishes reading.
    bool credit_flow_control = false;
};

class PutOperation {
  public:
    virtual ~PutOperation() = default;
    // What the receiver needs for get_async (a map; always holds "backend" and "nbytes").
    [[nodiscard]] virtual const Value& metadata() const = 0;
    // Blocks until the receiver has finished reading, so the memory may be reused.
    // deadline_exceeded after `timeout`; aborted when cleanup(request_id) or close() ran.
    [[nodiscard]] virtual Status wait_for_completion(Duration timeout) = 0;
    // Blocks until the receiver has taken the data: it holds a copy, or a zero-copy view that
    // it may keep for as long as it likes (the backend reuses the memory when the view goes).
    // After this, cleanup(request_id) on the sender no longer affects the receiver. Errors as
    // wait_for_completion. Backends without zero-copy receivers wait for completion.
    [[nodiscard]] virtual Status wait_for_delivery(Duration timeout) {
        return wait_for_completion(timeout);
    }
};

class GetOperation {
  public:
    virtual ~GetOperation() = default;
    // Blocks until the data is in place. deadline_exceeded after `timeout`; unavailable when
    // the sender is gone; aborted when cleanup(request_id) or close() ran.
    [[nodiscard]] virtual Status wait_for_completion(Duration timeout) = 0;
    // After a successful wait: the destination tensor, or in zero-copy mode a read-only view
    // whose last reference returns the sender's credit.
    [[nodiscard]] virtual Tensor tensor() const = 0;
};

class Relay {
  public:
    Relay() = default;
    Relay(const Relay&) = delete;
    Relay& operator=(const Relay&) = delete;
    virtual ~Relay() = default;

    [[nodiscard]] virtual std::string_view backend() const = 0;
    // Whether get_async reads metadata that `name` wrote: its own backend (a relay made of
    // several, relay/tiered_relay.h, reads each of theirs).
    [[nodiscard]] virtual bool reads_backend(std::string_view name) const {
        return name == backend();
    }
    [[nodiscard]] virtual Capabilities capabilities() const = 0;

    // A writable host buffer of `nbytes` whose put_async moves no bytes when the backend can
    // (a shared-memory slot). The default is an ordinary host tensor.
    [[nodiscard]] virtual Result<Tensor> allocate_send_buffer(std::size_t nbytes);

    // Starts sending a contiguous tensor (any dtype; moved as bytes). When the backend's
    // credits are exhausted this blocks until one returns; it fails only for errors.
    [[nodiscard]] virtual Result<std::unique_ptr<PutOperation>> put_async(
        const Tensor& tensor, const std::string& request_id,
        std::optional<std::int64_t> dst_rank = std::nullopt) = 0;

    // Starts receiving the transfer `metadata` describes into `dest` (a writable host tensor of
    // exactly metadata's nbytes), or, when `dest` is undefined, into a buffer the relay
    // provides (a zero-copy view where supported). Metadata from another backend, corrupted or
    // of the wrong size is invalid_argument with the reason.
    [[nodiscard]] virtual Result<std::unique_ptr<GetOperation>> get_async(
        const Value& metadata, Tensor dest, const std::string& request_id) = 0;

    // Releases everything the relay holds for `request_id` (slots, segments, pending
    // operations, which then fail with aborted). Idempotent.
    virtual void cleanup(const std::string& request_id) = 0;
    // Releases every resource; later calls fail with failed_precondition. Idempotent.
    virtual void close() = 0;
};

// Reads the common metadata fields, checking that `metadata` belongs to `backend`.
struct CommonMetadata {
    std::string backend;
    std::size_t nbytes = 0;
};
[[nodiscard]] Result<CommonMetadata> read_common_metadata(const Value& metadata,
                                                          std::string_view backend);

}  // namespace omnirt::relay
