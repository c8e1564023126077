#pragma once
#include <string_view>

namespace omnirt::cli {

// configs/qwen3_chat.yaml, embedded at build time: what `omnirt serve` runs without --config.
[[nodiscard]] std::string_view default_pipeline_yaml();
// configs/demo.yaml, embedded at build time: `omnirt serve --demo`.
[[nodiscard]] std::string_view demo_pipeline_yaml();

}  // namespace omnirt::cli
