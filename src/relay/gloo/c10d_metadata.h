#pragma once
// The metadata of one c10d relay transfer: what put_async returns and get_async reads. It names
// the process group, the send (source rank, destination rank, tag) and the bytes' dtype and
// shape. Internal to omnirt_relay_gloo; no libtorch here.
//
//   {"backend": "gloo", "group": "<id>", "nbytes": N, "src_rank": s, "dst_rank": d, "tag": t,
//    "dtype": "float32", "shape": [..]}
//
// Tags: the sender numbers its transfers to each destination 0, 1, 2, ... (wrapping at 2^31,
// the range c10d accepts), so a (src_rank, dst_rank, tag) triple names one transfer among all
// those in flight between a pair; "group" (random, agreed at rendezvous) keeps metadata of an
// earlier or other process group from matching a send of this one.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/tensor.h"
#include "core/value.h"

namespace omnirt::relay {

inline constexpr std::int64_t kC10dTagLimit = std::int64_t{1} << 31;  // tags are in [0, limit)

struct C10dMetadata {
    std::string backend;
    std::string group;
    std::size_t nbytes = 0;
    std::int64_t src_rank = 0;
    std::int64_t dst_rank = 0;
    std::int64_t tag = 0;
    DType dtype = DType::u8;
    Shape shape;
};

[[nodiscard]] Value to_metadata(const C10dMetadata& transfer);

// What a receiver of rank `receiver_rank` in the group `group` (of `world_size` ranks) of
// `backend` accepts. invalid_argument, with the reason, for another backend or group, missing
// or mistyped fields, ranks out of range, a transfer addressed to another rank, a tag out of
// range, or a dtype and shape that do not account for exactly nbytes.
[[nodiscard]] Result<C10dMetadata> parse_metadata(const Value& metadata, std::string_view backend,
                                                  std::string_view group,
                                                  std::int64_t receiver_rank,
                                                  std::int64_t world_size);

}  // namespace omnirt::relay
