#pragma once
// Engine internals shared by ucx_engine.cpp and ucx_engine_transfers.cpp (loop thread only).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "relay/ucx/ucx_engine.h"

namespace omnirt::relay::ucx {

// Active message id of the completion message a receiver sends once its read finished.
inline constexpr unsigned kCompletionMessageId = 0x6f6d;  // "om"
// Keys and mappings kept per sender.
inline constexpr std::size_t kPeerCacheLimit = 64;
inline constexpr std::uint64_t kCompletionMagic = 0x6f6d6e6972742d75ULL;  // "omnirt-u"

// The completion message's header (it has no payload).
struct CompletionMessage {
    std::uint64_t magic = kCompletionMagic;
    std::int64_t transfer_id = 0;
};

// Drops a transfer's memory and credit; returns its completion for the caller to set.
[[nodiscard]] std::shared_ptr<Completion> release(OutgoingTransfer transfer);

// Endpoints to one sender's worker.
struct Engine::Peer {
    std::string key;     // the worker address bytes
    std::string sender;  // the sender's label, for messages
    Endpoint data;       // without error handling, over shared memory (same host only): carries
                         // completion messages, and reads when the sender's memory cannot be
                         // mapped here (another pid namespace)
    Endpoint control;    // PEER error handling: reports the sender's death (absent when no
                         // transport supports it)
    // This sender's regions stay mapped and registered while it is open, so their unpacked keys
    // and (on this host) mappings are kept for later reads, at most kPeerCacheLimit of each.
    // Keys are declared after the endpoints: destroyed before them.
    std::map<std::vector<std::uint8_t>, RemoteKey> keys;
    std::map<std::pair<std::int64_t, std::uint64_t>, std::unique_ptr<PeerMapping>> mappings;
    int reads_in_flight = 0;
    bool retired = false;

    // The endpoint reads and completion messages use.
    [[nodiscard]] ucp_ep_h io() const { return data.valid() ? data.get() : control.get(); }
    [[nodiscard]] bool owns(ucp_ep_h ep) const {
        return (data.valid() && data.get() == ep) || (control.valid() && control.get() == ep);
    }
    // Starts closing both endpoints; requests still running go to `closing`. Cached keys go
    // first, or are given up when reads may still use them.
    void close_endpoints(std::vector<ucs_status_ptr_t>& closing) {
        if (reads_in_flight > 0) {
            for (auto& [bytes, key] : keys) key.leak();
        }
        keys.clear();
        for (Endpoint* endpoint : {&data, &control}) {
            if (!endpoint->valid()) continue;
            ucs_status_ptr_t request = endpoint->close();
            if (UCS_PTR_IS_PTR(request)) closing.push_back(request);
        }
    }
};

// A read UCX has not completed yet. Its address is the request's user data.
struct Engine::PendingRead {
    Engine* engine = nullptr;
    std::uint64_t id = 0;
    IncomingRead read;
    ucp_rkey_h rkey = nullptr;  // one of the peer's keys
    Peer* peer = nullptr;
};

}  // namespace omnirt::relay::ucx
