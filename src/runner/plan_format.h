#pragma once
// Internal to the plan codec: the layout version, the decode limits and the enum spellings
// shared by plan_codec.cpp (encode, files) and plan_decode.cpp (decode).
#include <cstdint>
#include <string_view>

#include "config/runtime_plan.h"
#include "proto/limits.h"

namespace omnirt::runner {

// Bumped whenever the Value layout of a plan changes; a child refuses another version (parent
// and child are the same binary, so a mismatch means a stale plan file).
inline constexpr std::int64_t kPlanFormatVersion = 1;

// A plan is small (a few KiB per stage); the limits bound what a corrupt or hostile plan file
// can cost. Factory arguments come from YAML, so no tensors.
inline constexpr proto::DecodeLimits kPlanDecodeLimits{
    .max_depth = 32,
    .max_string_bytes = std::uint64_t{1} << 20,
    .max_bytes_bytes = std::uint64_t{16} << 20,
    .max_container_elements = std::uint64_t{1} << 16,
    .max_total_elements = std::uint64_t{1} << 20,
    .max_total_bytes = std::uint64_t{64} << 20,
    .max_tensors = 0,
    .max_tensor_bytes = 0,
};

[[nodiscard]] inline std::string_view scheme_name(config::EndpointScheme scheme) {
    return scheme == config::EndpointScheme::tcp ? "tcp" : "ipc";
}

[[nodiscard]] inline std::string_view edge_kind_name(config::EdgeKind kind) {
    return kind == config::EdgeKind::stream ? "stream" : "normal";
}

}  // namespace omnirt::runner
