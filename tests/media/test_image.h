#pragma once
// The deterministic test image of tests/media/goldens/generate_image.py (same bytes).
#include <cstdint>

#include "media/image.h"

namespace omnirt::media::testing {

inline RgbImage test_image(int width, int height, std::uint32_t seed) {
    RgbImage image{.width = width, .height = height, .pixels = {}};
    image.pixels.resize(static_cast<std::size_t>(width) * height * 3);
    std::uint32_t state = seed;
    std::size_t i = 0;
    for (int y = 0; y < height; ++y) {
        for (int x = 0; x < width; ++x) {
            for (int c = 0; c < 3; ++c) {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                const int checker = ((x / 8 + y / 8) % 2) != 0 ? 200 : 0;
                image.pixels[i++] = static_cast<std::uint8_t>(
                    (x * 3 + y * 5 + c * 85 + checker + static_cast<int>(state & 31)) & 255);
            }
        }
    }
    return image;
}

}  // namespace omnirt::media::testing
