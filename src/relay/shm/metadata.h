#pragma once
// The metadata of one shm transfer, as put_async publishes it and get_async reads it back:
//   {"backend": "shm", "nbytes": N, "kind": "slot" | "dedicated", "segment": "/omnirt....",
//    "owner_pid": P, "offset": O,                       // payload offset in the segment
//    "generation": G,                                   // of the slot's or segment's use
//    "slot": S, "pool_id": I}                           // slot transfers only
//    "segment_id": D}                                   // dedicated transfers only
// Parsing checks kinds, ranges and that the segment name is an omnirt name owned by
// owner_pid; bounds against the mapped segment are checked by the receiver.
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/value.h"

namespace omnirt::relay::shm {

inline constexpr std::string_view kBackendName = "shm";

enum class TransferKind : std::uint8_t { slot, dedicated };

struct TransferMetadata {
    TransferKind kind = TransferKind::slot;
    std::string segment;
    pid_t owner_pid = 0;
    std::uint64_t nbytes = 0;
    std::uint64_t offset = 0;
    std::uint32_t slot = 0;
    std::uint32_t generation = 0;
    std::uint64_t pool_id = 0;
    std::uint64_t segment_id = 0;

    [[nodiscard]] Value to_value() const;
    // invalid_argument naming the offending field for anything malformed.
    [[nodiscard]] static Result<TransferMetadata> parse(const Value& metadata);
};

}  // namespace omnirt::relay::shm
