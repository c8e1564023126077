#pragma once
// The "ucx" relay backend: UCX memory registration and one-sided reads, between hosts (TCP, or
// RDMA where present) and on one host (shared memory). Design notes: relay/ucx/README.md.
//
// Sender: put_async stages the tensor in registered shared memory (a slot of a pool mapped once,
// or a dedicated mapping for tensors larger than a slot; allocate_send_buffer hands out that
// memory directly so the put copies nothing) and returns metadata with its worker address, the
// packed remote key, the address, where readers on its host map it, and a transfer id
// (relay/ucx/ucx_metadata.h). The memory and its credit stay taken until the receiver's
// completion message arrives, cleanup() or close(). Out of credits, put_async blocks
// (backpressure); it never fails for that.
//
// Receiver: get_async connects to the sender's worker (endpoints cached per sender). On the
// sender's host it copies out of the sender's shared memory; elsewhere it unpacks the key and
// issues ucp_get_nbx into the destination (RDMA or TCP, as UCX chooses). When the bytes are in
// place it sends the sender a completion message carrying the transfer id.
//
// One ucp_context and one ucp_worker per relay; a progress thread owns the worker and sleeps in
// epoll on its event fd (relay/ucx/ucx_engine.h). UCX_* environment variables (UCX_TLS,
// UCX_NET_DEVICES, ...) are honoured; by default UCX uses every transport it finds.
//
// Capabilities: cross_host; no zero-copy receive (RelayOptions::zero_copy is ignored: get
// always copies into the destination); host memory only.
#include <memory>

#include "core/error.h"
#include "relay/relay.h"

namespace omnirt::relay {

// Registers the factory "ucx" with the relay registry. Idempotent; thread-safe.
[[nodiscard]] Status register_ucx_backend();

// Creates a ucx relay. invalid_argument for zero slot_bytes or credits; unimplemented for a
// non-cpu device; unavailable when UCX cannot start.
[[nodiscard]] Result<std::unique_ptr<Relay>> create_ucx_relay(const RelayOptions& options);

}  // namespace omnirt::relay
