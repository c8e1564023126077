#pragma once
// Internal to the plan codec: the layout version, the decode limits, the enum spellings and the
// error helpers shared by plan_codec.cpp (encode, files), plan_decode.cpp (fields) and
// plan_references.cpp (names).
#include <cstdint>
#include <string>
#include <string_view>

#include "config/runtime_plan.h"
#include "core/error.h"
#include "proto/limits.h"

namespace omnirt::runner {

// Bumped whenever the Value layout of a plan changes; a child refuses another version (parent
// and child are the same binary, so a mismatch means a stale plan file).
inline constexpr std::int64_t kPlanFormatVersion = 3;

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

// Error helpers of the decoder: "runtime plan: <path>: <message>", invalid_argument.
inline constexpr std::size_t kMaxQuotedChars = 64;

inline std::string quoted(std::string_view text) {
    std::string out = "'";
    out += text.substr(0, kMaxQuotedChars);
    if (text.size() > kMaxQuotedChars) out += "...";
    return out + "'";
}

inline unexpected<Error> field_error(const std::string& path, const std::string& message) {
    return fail(ErrorCode::invalid_argument,
                "runtime plan: " + (path.empty() ? std::string("plan") : path) + ": " + message);
}

inline std::string indexed(const std::string& path, std::size_t index) {
    return path + "[" + std::to_string(index) + "]";
}

// Names are unique and every name that refers to a stage or process resolves.
[[nodiscard]] Status check_plan_references(const config::RuntimePlan& plan);

}  // namespace omnirt::runner
