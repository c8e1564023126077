#pragma once
// A relay made of two, chosen per peer: `local` (shm) for peers on this node and `remote` (ucx)
// for peers on other nodes (docs/multi_node.md). The runtime plan decides which relay ranks are
// remote; the stage sees one Relay.
//
//   put_async(tensor, request_id, dst_rank): `remote` when dst_rank is a remote rank, else
//     `local` (a put without dst_rank goes to `local`).
//   get_async(metadata, ...): the relay whose backend() is metadata["backend"] (reads_backend
//     is true for both); metadata of any other backend is invalid_argument.
//   allocate_send_buffer: from the relay every send of this process uses (`send_buffers`), else
//     ordinary host memory (the put copies it once).
//   cleanup / close reach both.
//
// Capabilities: the intersection of both, except cross_host (true). Thread safety: as Relay;
// the routing table is fixed at creation.
#include <cstdint>
#include <memory>
#include <set>

#include "relay/relay.h"

namespace omnirt::relay {

struct TieredRelayOptions {
    std::unique_ptr<Relay> local;   // peers on this node
    std::unique_ptr<Relay> remote;  // peers on other nodes
    std::set<std::int64_t> remote_ranks;
    // Which relay's memory allocate_send_buffer hands out: the one all of this process's sends
    // go through; none when they use both.
    enum class SendBuffers : std::uint8_t { local, remote, host } send_buffers = SendBuffers::host;
};

// invalid_argument when either relay is missing or both have the same backend.
[[nodiscard]] Result<std::unique_ptr<Relay>> create_tiered_relay(TieredRelayOptions options);

}  // namespace omnirt::relay
