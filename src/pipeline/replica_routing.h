#pragma once
// Replica routing (docs/pipeline.md "Replicas"). A process group with `replicas: N` runs as N
// processes; for every replicated group a request may pass through, the coordinator picks one
// replica at admission and writes the choice into the request's metadata
// (metadata.replica_routes = {stage: replica}), so every upstream stage sends the request's
// payloads, stream chunks and signals to that replica, and supervision knows which requests a
// dead replica takes down.
//
// The choice is sticky by a routing key (routing_key) and round-robin without one.
//
// Thread safety: pure functions.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/request.h"
#include "core/value.h"

namespace omnirt::pipeline {

inline constexpr const char* kReplicaRoutesKey = "replica_routes";

// The sticky key of a request: metadata.user, else metadata.session_id (non-empty strings: the
// same client or conversation), else a hash of its conversation prefix (inputs.messages up to
// and including the first user message, which every later turn of the conversation repeats, so
// a conversation's first turn already has its key). nullopt: no key (a plain prompt): round-robin.
[[nodiscard]] std::optional<std::uint64_t> routing_key(const OmniRequest& request);

// Rendezvous (highest random weight) choice among `serving` replica indexes (non-empty): a key
// keeps its replica while that one serves; when it is down only its keys move, and they come
// back when it serves again.
[[nodiscard]] int sticky_replica(std::uint64_t key, const std::string& group,
                                 const std::vector<int>& serving);

// Writes `routes` into request.metadata.replica_routes (replacing what a client put there).
// invalid_argument when metadata is neither null nor a map.
[[nodiscard]] Status set_replica_routes(OmniRequest& request,
                                        const std::map<std::string, int>& routes);

// The routes in `metadata` (empty when there are none or they are malformed).
[[nodiscard]] std::map<std::string, int> replica_routes(const Value& metadata);

}  // namespace omnirt::pipeline
