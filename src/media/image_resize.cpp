// resize_bicubic: Pillow's separable convolution resampling (libImaging/Resample.c), re-derived
// for RGB8 and the bicubic filter only.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "media/image.h"

namespace omnirt::media {
namespace {

// Fixed point of the coefficients: 32 bits minus 8 for the pixel and 2 of headroom for the
// negative lobes' overshoot.
constexpr int kPrecisionBits = 32 - 8 - 2;

double bicubic(double x) {
    constexpr double a = -0.5;
    x = std::abs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}
constexpr double kBicubicSupport = 2.0;

// For each output index: the first input index and the fixed-point weights of the inputs it
// reads (a contiguous run).
struct Taps {
    std::vector<int> first;
    std::vector<int> count;
    std::vector<std::int32_t> weights;  // [out * stride + i]
    int stride = 0;
};

Taps compute_taps(int in_size, int out_size) {
    const double scale = static_cast<double>(in_size) / out_size;
    const double filter_scale = std::max(scale, 1.0);
    const double support = kBicubicSupport * filter_scale;
    Taps taps;
    taps.stride = static_cast<int>(std::ceil(support)) * 2 + 1;
    taps.first.resize(out_size);
    taps.count.resize(out_size);
    taps.weights.assign(static_cast<std::size_t>(out_size) * taps.stride, 0);
    std::vector<double> w(static_cast<std::size_t>(taps.stride));
    for (int out = 0; out < out_size; ++out) {
        const double center = (out + 0.5) * scale;
        // C casts truncate toward zero: the same rounding as the reference for both ends.
        const int low = std::max(0, static_cast<int>(center - support + 0.5));
        const int high = std::min(in_size, static_cast<int>(center + support + 0.5));
        const int count = high - low;
        double total = 0.0;
        for (int i = 0; i < count; ++i) {
            w[i] = bicubic((i + low - center + 0.5) / filter_scale);
            total += w[i];
        }
        for (int i = 0; i < count; ++i) {
            const double normalised = total != 0.0 ? w[i] / total : w[i];
            const double fixed = normalised * (1 << kPrecisionBits);
            taps.weights[static_cast<std::size_t>(out) * taps.stride + i] =
                static_cast<std::int32_t>(normalised < 0 ? fixed - 0.5 : fixed + 0.5);
        }
        taps.first[out] = low;
        taps.count[out] = count;
    }
    return taps;
}

std::uint8_t clip8(std::int32_t accumulator) {
    return static_cast<std::uint8_t>(std::clamp(accumulator >> kPrecisionBits, 0, 255));
}

// Rows [row_begin, row_end) of `in`, resampled horizontally to `width`.
RgbImage resample_horizontal(const RgbImage& in, int row_begin, int row_end, int width) {
    const Taps taps = compute_taps(in.width, width);
    RgbImage out{.width = width, .height = row_end - row_begin, .pixels = {}};
    out.pixels.resize(static_cast<std::size_t>(out.width) * out.height * 3);
    for (int y = row_begin; y < row_end; ++y) {
        const std::uint8_t* src = in.pixels.data() + static_cast<std::size_t>(y) * in.width * 3;
        std::uint8_t* dst =
            out.pixels.data() + static_cast<std::size_t>(y - row_begin) * out.width * 3;
        for (int x = 0; x < width; ++x) {
            const std::int32_t* k = taps.weights.data() + static_cast<std::size_t>(x) * taps.stride;
            const std::uint8_t* p = src + static_cast<std::size_t>(taps.first[x]) * 3;
            std::int32_t r = 1 << (kPrecisionBits - 1);
            std::int32_t g = r;
            std::int32_t b = r;
            for (int i = 0; i < taps.count[x]; ++i) {
                r += p[i * 3 + 0] * k[i];
                g += p[i * 3 + 1] * k[i];
                b += p[i * 3 + 2] * k[i];
            }
            dst[x * 3 + 0] = clip8(r);
            dst[x * 3 + 1] = clip8(g);
            dst[x * 3 + 2] = clip8(b);
        }
    }
    return out;
}

// Vertical pass; `taps` index rows of `in` relative to `row_offset`.
RgbImage resample_vertical(const RgbImage& in, const Taps& taps, int row_offset, int height) {
    RgbImage out{.width = in.width, .height = height, .pixels = {}};
    const std::size_t row_bytes = static_cast<std::size_t>(in.width) * 3;
    out.pixels.resize(row_bytes * height);
    std::vector<std::int32_t> sums(row_bytes);
    for (int y = 0; y < height; ++y) {
        const std::int32_t* k = taps.weights.data() + static_cast<std::size_t>(y) * taps.stride;
        std::fill(sums.begin(), sums.end(), 1 << (kPrecisionBits - 1));
        for (int i = 0; i < taps.count[y]; ++i) {
            const std::uint8_t* src =
                in.pixels.data() +
                static_cast<std::size_t>(taps.first[y] - row_offset + i) * row_bytes;
            const std::int32_t weight = k[i];
            for (std::size_t j = 0; j < row_bytes; ++j) sums[j] += src[j] * weight;
        }
        std::uint8_t* dst = out.pixels.data() + static_cast<std::size_t>(y) * row_bytes;
        for (std::size_t j = 0; j < row_bytes; ++j) dst[j] = clip8(sums[j]);
    }
    return out;
}

}  // namespace

Result<RgbImage> resize_bicubic(const RgbImage& image, int width, int height) {
    if (image.width <= 0 || image.height <= 0 ||
        image.pixels.size() != static_cast<std::size_t>(image.width) * image.height * 3) {
        return fail(ErrorCode::invalid_argument,
                    "resize: the image is empty or its pixel buffer does not hold " +
                        std::to_string(image.width) + " x " + std::to_string(image.height) +
                        " RGB pixels");
    }
    if (width < 1 || height < 1) {
        return fail(ErrorCode::invalid_argument, "resize: target size " + std::to_string(width) +
                                                     " x " + std::to_string(height) +
                                                     " must be at least 1 x 1");
    }
    const bool horizontal = width != image.width;
    const bool vertical = height != image.height;
    if (!horizontal && !vertical) return image;
    if (!vertical) return resample_horizontal(image, 0, image.height, width);
    const Taps vertical_taps = compute_taps(image.height, height);
    if (!horizontal) return resample_vertical(image, vertical_taps, 0, height);
    // Only the rows the vertical pass reads go through the horizontal pass.
    const int first_row = vertical_taps.first.front();
    const int last_row = vertical_taps.first.back() + vertical_taps.count.back();
    const RgbImage temporary = resample_horizontal(image, first_row, last_row, width);
    return resample_vertical(temporary, vertical_taps, first_row, height);
}

}  // namespace omnirt::media
