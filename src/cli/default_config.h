#pragma once
#include <string_view>

namespace omnirt::cli {

// configs/demo.yaml, embedded at build time: what `omnirt serve` runs without --config.
[[nodiscard]] std::string_view default_pipeline_yaml();

}  // namespace omnirt::cli
