#pragma once
// A vision grid in patch units (image_grid_thw / video_grid_thw rows): t temporal groups of
// h x w patches. Shared by the prompt layout (no libtorch) and the vision encoder.
#include <cstdint>

namespace omnirt::models::qwen3_omni {

struct GridThw {
    std::int64_t t = 1;
    std::int64_t h = 0;
    std::int64_t w = 0;

    [[nodiscard]] std::int64_t patches() const { return t * h * w; }
    friend bool operator==(const GridThw&, const GridThw&) = default;
};

}  // namespace omnirt::models::qwen3_omni
