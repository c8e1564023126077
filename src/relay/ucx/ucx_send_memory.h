#pragma once
// The sender's registered memory. A pool of `credits` slots of `slot_bytes` is mapped once
// (ucp_mem_map); tensors larger than a slot get a dedicated mapping for their transfer. Each
// transfer holds one credit (a slot lease) until the receiver confirms, so at most `credits`
// transfers are in flight and put_async blocks when they are all taken (backpressure).
//
// Leases are Storage objects whose last reference returns the slot, so a slot handed out by
// allocate_send_buffer stays valid for as long as any tensor uses it, even after close().
// Released dedicated mappings stay mapped for reuse while the relay is open (their pages are
// given back beyond the pool's size in total).
//
// Thread safety: all methods may be called from any thread.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "relay/ucx/ucx_handles.h"

namespace omnirt::relay::ucx {

// A tensor staged in registered memory for one put.
struct StagedSource {
    Tensor tensor;                    // contiguous bytes in registered memory; keeps them alive
    std::shared_ptr<Storage> credit;  // the transfer's credit (a slot lease); may be the same
                                      // slot as `tensor`'s storage
    // The registered memory holding `tensor`. Every region stays mapped and registered while
    // the relay is open, so readers may keep its key and mapping for later transfers.
    std::shared_ptr<MemoryRegion> region;
};

class SendMemory {
  public:
    [[nodiscard]] static Result<std::unique_ptr<SendMemory>> create(
        std::shared_ptr<Context> context, std::size_t slot_bytes, std::size_t credits);
    SendMemory(const SendMemory&) = delete;
    SendMemory& operator=(const SendMemory&) = delete;
    ~SendMemory();

    // A writable buffer a put sends without copying: a free slot when `nbytes` fits one, a
    // dedicated registered mapping when it is larger. When every slot is leased it returns plain
    // host memory instead of blocking (a caller may hold several buffers before putting any), and
    // put_async then copies it into a slot.
    [[nodiscard]] Result<Tensor> allocate(std::size_t nbytes);

    // Places a contiguous or strided host tensor in registered memory: a tensor already in memory
    // this object handed out is used in place; otherwise the bytes are copied into a slot (or a
    // new dedicated mapping when larger than a slot). Blocks until a credit is free; aborted once
    // close() ran.
    [[nodiscard]] Result<StagedSource> stage(const Tensor& tensor);

    // Wakes blocked stage() calls (they fail with aborted) and refuses new ones.
    void wake_waiters();
    // wake_waiters(), and unmaps the idle dedicated mappings: call it once no reader can reach
    // them any more (the worker is gone). Memory handed out stays valid until its last
    // reference goes.
    void close();

    [[nodiscard]] std::size_t slot_bytes() const { return slot_bytes_; }
    [[nodiscard]] std::size_t free_credits() const;

  private:
    struct Pool;
    SendMemory(std::shared_ptr<Context> context, std::shared_ptr<Pool> pool);

    [[nodiscard]] Result<std::shared_ptr<Storage>> acquire_credit();
    struct Dedicated {
        std::shared_ptr<Storage> storage;      // `nbytes` of `region`; returns it to the idle
        std::shared_ptr<MemoryRegion> region;  // mappings at the end
    };
    // A dedicated mapping for `nbytes` (an idle one of the same power-of-two size, or a new one),
    // faulted in; `track` lets stage() recognise it later (allocate()'s buffers).
    [[nodiscard]] Result<Dedicated> dedicated(std::size_t nbytes, bool track);
    // The dedicated mapping holding [data, data + nbytes), if allocate() made one.
    [[nodiscard]] std::shared_ptr<MemoryRegion> find_dedicated(const std::byte* data,
                                                               std::size_t nbytes);

    std::shared_ptr<Context> context_;
    std::shared_ptr<Pool> pool_;
    std::size_t slot_bytes_;

    std::mutex dedicated_mutex_;
    std::vector<std::weak_ptr<MemoryRegion>> dedicated_;
};

}  // namespace omnirt::relay::ucx
