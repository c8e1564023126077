#pragma once
// Token ids and small builders shared by the Qwen3-Omni layout tests (the checkpoint's ids, as
// LayoutConfig's defaults).
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace omnirt::models::qwen3_omni::testing {

inline constexpr std::int64_t kVisionStart = 151652;
inline constexpr std::int64_t kVisionEnd = 151653;
inline constexpr std::int64_t kImage = 151655;
inline constexpr std::int64_t kVideo = 151656;
inline constexpr std::int64_t kAudioStart = 151669;
inline constexpr std::int64_t kAudioEnd = 151670;
inline constexpr std::int64_t kAudio = 151675;
inline constexpr std::int64_t kImStart = 151644;
inline constexpr std::int64_t kImEnd = 151645;

// Concatenates runs of ids: ids({{10, 11}, repeat(kImage, 6)}).
inline std::vector<std::int64_t> ids(std::initializer_list<std::vector<std::int64_t>> parts) {
    std::vector<std::int64_t> out;
    for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
    return out;
}

inline std::vector<std::int64_t> repeat(std::int64_t id, std::size_t count) {
    return std::vector<std::int64_t>(count, id);
}

}  // namespace omnirt::models::qwen3_omni::testing
