#pragma once
// The c10d relay backends: libtorch process groups moving tensors with point-to-point
// send/recv over an explicit rank topology (communication.md, "nccl"). Runtime prep gives every
// stage process a rank, the world size and a rendezvous; put_async names the receiver's rank.
//
//   gloo  TCP between host buffers, across processes and hosts (libtorch's ProcessGroupGloo).
//   nccl  GPU to GPU (ProcessGroupNCCL); built only against a CUDA libtorch with NCCL and
//         registered only when a CUDA device is present. Without it create_relay says that a
//         CUDA libtorch is needed.
//
// Rendezvous (RelayOptions::rendezvous):
//   file://<path>     a c10d FileStore; every rank opens the same file, which must not be left
//                     over from an earlier group (use the instance's runtime directory).
//   tcp://host:port   a c10d TCPStore; rank 0 listens on port, the others connect to host.
// Creation blocks until all world_size ranks have joined and every pair is connected, and
// fails with deadline_exceeded when that takes longer than C10dOptions::timeout.
//
// This header does not include libtorch: the layers that create relays stay torch-free.
#include <chrono>
#include <memory>
#include <string>

#include "core/error.h"
#include "relay/relay.h"

namespace omnirt::relay {

struct C10dOptions {
    // Bounds the rendezvous (every rank joining, pairs connecting) and is the transport's own
    // timeout, which a relay never lets fire during a wait (wait_for_completion enforces the
    // caller's timeout itself; see c10d_relay.cpp).
    Duration timeout = std::chrono::seconds(30);
    // gloo: the address (hostname or IP) the transport listens on and announces to its peers.
    // Empty: the interface named by GLOO_SOCKET_IFNAME when set (as in PyTorch), otherwise this
    // machine's hostname, falling back to loopback when the hostname does not resolve.
    std::string listen_host;
};

// Creates a relay of options.backend ("gloo" or "nccl") and joins its process group. Blocks
// (see above). invalid_argument for a malformed rendezvous, rank or device; deadline_exceeded
// when the group did not form in time; unavailable when the store or a peer failed.
[[nodiscard]] Result<std::unique_ptr<Relay>> create_c10d_relay(const RelayOptions& options,
                                                               const C10dOptions& c10d = {});

// Registers "gloo" (and "nccl" where available) with the relay registry, using default
// C10dOptions. Idempotent and thread-safe.
[[nodiscard]] Status register_c10d_backends();

}  // namespace omnirt::relay
