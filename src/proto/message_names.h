#pragma once
// Internal to proto/: the wire "type" names of control messages, in ControlMessage order.
#include <array>
#include <string_view>
#include <variant>

#include "proto/messages.h"

namespace omnirt::proto::detail {

inline constexpr std::string_view kSubmitType = "submit";
inline constexpr std::string_view kDataReadyType = "data_ready";
inline constexpr std::string_view kCompleteType = "complete";
inline constexpr std::string_view kStreamType = "stream";
inline constexpr std::string_view kAbortType = "abort";
inline constexpr std::string_view kShutdownType = "shutdown";
inline constexpr std::string_view kProfilerStartType = "profiler_start";
inline constexpr std::string_view kProfilerStopType = "profiler_stop";
inline constexpr std::string_view kHeartbeatType = "heartbeat";
inline constexpr std::string_view kPauseType = "pause";

inline constexpr std::array<std::string_view, 10> kMessageTypeNames = {
    kSubmitType,   kDataReadyType,     kCompleteType,     kStreamType,    kAbortType,
    kShutdownType, kProfilerStartType, kProfilerStopType, kHeartbeatType, kPauseType,
};
static_assert(kMessageTypeNames.size() == std::variant_size_v<ControlMessage>,
              "every ControlMessage alternative needs a wire name");

}  // namespace omnirt::proto::detail
