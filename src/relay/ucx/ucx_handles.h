#pragma once
// RAII owners of the UCX handles the ucx relay uses. Each wrapper releases its handle in its
// destructor, in the order UCX requires (memory regions and workers keep their context alive).
//
// Threading: the context is created with mt_workers_shared, so Context and MemoryRegion may be
// used from any thread (ucp_mem_map / ucp_mem_unmap / ucp_rkey_pack take the context's lock).
// Worker, Endpoint and RemoteKey belong to the one thread that progresses the worker
// (UCS_THREAD_MODE_SINGLE); they may be destroyed on another thread only once that thread has
// stopped.
#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "relay/ucx/ucx_file_descriptor.h"
#include "relay/ucx/ucx_shared_memory.h"

namespace omnirt::relay::ucx {

// "<what>: <UCX status text>" under `code`.
[[nodiscard]] Error ucx_error(ErrorCode code, std::string_view what, ucs_status_t status);

// Maps the pages of [data, data + nbytes) into this process's page tables in one call
// (MADV_POPULATE_*), instead of one fault per page on first touch. Best effort: a kernel without
// it just faults as usual.
void prefault(const void* data, std::size_t nbytes, bool for_write);

// One ucp_context with RMA, AM and WAKEUP. UCX_* environment variables (UCX_TLS,
// UCX_NET_DEVICES, ...) apply as usual; nothing here overrides them.
class Context {
  public:
    [[nodiscard]] static Result<std::shared_ptr<Context>> create(const std::string& name);
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    ~Context();

    [[nodiscard]] ucp_context_h get() const { return context_; }

  private:
    explicit Context(ucp_context_h context) : context_(context) {}
    ucp_context_h context_;
};

// Shared memory (relay/ucx/ucx_shared_memory.h) registered with UCX (ucp_mem_map of that
// memory), so peers can read it: readers on this host map the memory itself, readers elsewhere
// use the packed remote key (RDMA, or TCP served by the sender's worker). Unregistered and
// unmapped on destruction; keeps the context alive.
class MemoryRegion {
  public:
    [[nodiscard]] static Result<std::shared_ptr<MemoryRegion>> allocate(
        std::shared_ptr<Context> context, std::size_t nbytes);
    MemoryRegion(const MemoryRegion&) = delete;
    MemoryRegion& operator=(const MemoryRegion&) = delete;
    ~MemoryRegion();

    [[nodiscard]] std::byte* data() const { return memory_->data(); }
    [[nodiscard]] std::size_t size() const { return memory_->size(); }
    [[nodiscard]] const SharedMemory& shared() const { return *memory_; }
    [[nodiscard]] bool contains(const std::byte* begin, std::size_t nbytes) const;
    // The packed remote key a peer unpacks to read this region.
    [[nodiscard]] const std::vector<std::uint8_t>& packed_rkey() const { return packed_rkey_; }

  private:
    MemoryRegion(std::shared_ptr<Context> context, std::unique_ptr<SharedMemory> memory,
                 ucp_mem_h memh, std::vector<std::uint8_t> packed_rkey);

    std::shared_ptr<Context> context_;
    std::unique_ptr<SharedMemory> memory_;
    ucp_mem_h memh_;
    std::vector<std::uint8_t> packed_rkey_;
};

// A ucp_worker in UCS_THREAD_MODE_SINGLE with its wake-up file descriptor and address.
class Worker {
  public:
    [[nodiscard]] static Result<std::unique_ptr<Worker>> create(std::shared_ptr<Context> context,
                                                                const std::string& name);
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;
    ~Worker();

    [[nodiscard]] ucp_worker_h get() const { return worker_; }
    // Signalled by UCX after ucp_worker_arm() returned UCS_OK and an event arrived.
    [[nodiscard]] int event_fd() const { return event_fd_; }
    [[nodiscard]] const std::vector<std::uint8_t>& address() const { return address_; }

  private:
    Worker(std::shared_ptr<Context> context, ucp_worker_h worker, int event_fd,
           std::vector<std::uint8_t> address);

    std::shared_ptr<Context> context_;
    ucp_worker_h worker_;
    int event_fd_;
    std::vector<std::uint8_t> address_;
};

// An endpoint to a peer worker. PEER error handling reports a dead peer through the error
// callback and allows a forced close; NONE error handling is what UCX 1.13 needs to pick its
// shared-memory transports (posix, sysv, cma support no peer-failure handling).
class Endpoint {
  public:
    enum class ErrorMode { none, peer };

    Endpoint() = default;
    // `address` is a peer's worker address (UCX reads it without a length: the caller must have
    // verified it). `on_error(arg, ep, status)` runs on the worker's thread.
    [[nodiscard]] static Result<Endpoint> connect(ucp_worker_h worker,
                                                  std::span<const std::uint8_t> address,
                                                  ErrorMode mode, ucp_err_handler_cb_t on_error,
                                                  void* arg);
    Endpoint(Endpoint&& other) noexcept;
    Endpoint& operator=(Endpoint&& other) noexcept;
    Endpoint(const Endpoint&) = delete;
    Endpoint& operator=(const Endpoint&) = delete;
    // Starts close() and releases the request without waiting for it.
    ~Endpoint();

    [[nodiscard]] ucp_ep_h get() const { return ep_; }
    [[nodiscard]] bool valid() const { return ep_ != nullptr; }
    [[nodiscard]] ErrorMode mode() const { return mode_; }
    // Starts closing: forced for PEER endpoints (outstanding operations complete with
    // UCS_ERR_CANCELED), a flush otherwise (UCX forbids forcing NONE endpoints). Returns the
    // close request for the caller to progress and free (null or an error when done at once).
    [[nodiscard]] ucs_status_ptr_t close();

  private:
    Endpoint(ucp_ep_h ep, ErrorMode mode) : ep_(ep), mode_(mode) {}
    ucp_ep_h ep_ = nullptr;
    ErrorMode mode_ = ErrorMode::none;
};

// An unpacked remote key, valid for the endpoint it was unpacked on.
class RemoteKey {
  public:
    RemoteKey() = default;
    // `packed` must have been verified (UCX parses it without a length).
    [[nodiscard]] static Result<RemoteKey> unpack(ucp_ep_h ep,
                                                  std::span<const std::uint8_t> packed);
    RemoteKey(RemoteKey&& other) noexcept : rkey_(std::exchange(other.rkey_, nullptr)) {}
    RemoteKey& operator=(RemoteKey&& other) noexcept;
    RemoteKey(const RemoteKey&) = delete;
    RemoteKey& operator=(const RemoteKey&) = delete;
    ~RemoteKey();

    [[nodiscard]] ucp_rkey_h get() const { return rkey_; }
    // Gives the key up without destroying it: for a read UCX never completed, whose request may
    // still refer to the key until the worker is destroyed.
    void leak() { rkey_ = nullptr; }

  private:
    explicit RemoteKey(ucp_rkey_h rkey) : rkey_(rkey) {}
    ucp_rkey_h rkey_ = nullptr;
};

}  // namespace omnirt::relay::ucx
