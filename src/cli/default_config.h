#pragma once
#include <string_view>

namespace omnirt::cli {

// configs/demo.yaml, embedded at build time: `omnirt serve --demo`. (The chat pipeline served
// without --config is the model family's, models/family.h ServeDefaults.)
[[nodiscard]] std::string_view demo_pipeline_yaml();

}  // namespace omnirt::cli
