#include "bench/media_bench.h"

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <cstdio>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numbers>
#include <sstream>

#include "media/image.h"
#include "media/mel.h"
#include "media/video.h"
#include "media/vision.h"

namespace omnirt::bench {
namespace {

// A 1920x1080 test card: gradients, edges and texture, so the JPEG is not trivially small.
media::RgbImage test_card(int width, int height) {
    media::RgbImage image{.width = width, .height = height, .pixels = {}};
    image.pixels.resize(static_cast<std::size_t>(width) * height * 3);
    std::uint32_t state = 12345;
    for (int y = 0; y < height; ++y) {
        for (int x = 0; x < width; ++x) {
            state = state * 1664525u + 1013904223u;
            const int checker = ((x / 64 + y / 64) % 2) != 0 ? 60 : 0;
            std::uint8_t* p = image.pixels.data() + (static_cast<std::size_t>(y) * width + x) * 3;
            p[0] = static_cast<std::uint8_t>((x * 255 / width + checker + (state >> 29)) & 255);
            p[1] = static_cast<std::uint8_t>((y * 255 / height + checker + (state >> 28)) & 255);
            p[2] = static_cast<std::uint8_t>(((x + y) / 8 + (state >> 27)) & 255);
        }
    }
    return image;
}

std::string encode_jpeg(const media::RgbImage& image, int quality) {
    jpeg_compress_struct info{};
    jpeg_error_mgr errors{};
    info.err = jpeg_std_error(&errors);  // exits on error: the input here is our own
    jpeg_create_compress(&info);
    unsigned char* buffer = nullptr;
    unsigned long size = 0;
    jpeg_mem_dest(&info, &buffer, &size);
    info.image_width = static_cast<JDIMENSION>(image.width);
    info.image_height = static_cast<JDIMENSION>(image.height);
    info.input_components = 3;
    info.in_color_space = JCS_RGB;
    jpeg_set_defaults(&info);
    jpeg_set_quality(&info, quality, TRUE);
    jpeg_start_compress(&info, TRUE);
    while (info.next_scanline < info.image_height) {
        auto* row = const_cast<unsigned char*>(
            image.pixels.data() + static_cast<std::size_t>(info.next_scanline) * image.width * 3);
        jpeg_write_scanlines(&info, &row, 1);
    }
    jpeg_finish_compress(&info);
    std::string out(reinterpret_cast<const char*>(buffer), size);
    jpeg_destroy_compress(&info);
    std::free(buffer);
    return out;
}

std::span<const std::byte> bytes_of(const std::string& data) {
    return std::as_bytes(std::span<const char>(data.data(), data.size()));
}

template <class T>
Status status_of(const Result<T>& result) {
    if (!result) return fail(result.error());
    return ok_status();
}

// Runs `body` warmup + iterations times; the body returns a Status.
Result<MediaBenchCase> measure(const MediaBenchOptions& options, std::string name,
                               std::string detail, const std::function<Status()>& body) {
    std::vector<double> times;
    for (int i = 0; i < options.warmup + options.iterations; ++i) {
        const auto start = std::chrono::steady_clock::now();
        Status status = body();
        const auto end = std::chrono::steady_clock::now();
        if (!status) return fail(status.error().with_context(name));
        if (i >= options.warmup) {
            times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
        }
    }
    std::sort(times.begin(), times.end());
    return MediaBenchCase{.name = std::move(name),
                          .detail = std::move(detail),
                          .best_ms = times.front(),
                          .median_ms = times[times.size() / 2]};
}

}  // namespace

Result<MediaBenchReport> run_media_bench(const MediaBenchOptions& options) {
    if (options.iterations < 1 || options.warmup < 0) {
        return fail(ErrorCode::invalid_argument, "bench media: iterations >= 1, warmup >= 0");
    }
    MediaBenchReport report;
    report.iterations = options.iterations;
    auto add = [&](Result<MediaBenchCase> c) -> Status {
        if (!c) return fail(c.error());
        report.cases.push_back(std::move(*c));
        return ok_status();
    };

    // Image.
    const std::string jpeg = encode_jpeg(test_card(1920, 1080), 90);
    OMNI_TRY(const media::RgbImage decoded, media::decode_image(bytes_of(jpeg)));
    OMNI_TRY(const media::ResizedSize size, media::smart_resize(decoded.height, decoded.width));
    OMNI_TRY(const media::RgbImage resized,
             media::resize_bicubic(decoded, size.width, size.height));
    OMNI_TRY(const media::VisionPatches reference, media::preprocess_image(decoded));
    const std::string image_detail = "1920x1080 jpeg (" + std::to_string(jpeg.size() / 1024) +
                                     " KiB) -> " + std::to_string(size.width) + "x" +
                                     std::to_string(size.height) + ", " +
                                     std::to_string(reference.rows) + " rows x 1536";
    OMNI_RETURN_IF_ERROR(
        add(measure(options, "image: jpeg -> pixel_values", image_detail, [&]() -> Status {
            OMNI_TRY(const media::RgbImage image, media::decode_image(bytes_of(jpeg)));
            OMNI_TRY(const media::VisionPatches patches, media::preprocess_image(image));
            if (patches.rows != reference.rows) return fail(ErrorCode::internal, "rows changed");
            return ok_status();
        })));
    OMNI_RETURN_IF_ERROR(
        add(measure(options, "  decode jpeg", "libjpeg-turbo, RGB",
                    [&]() -> Status { return status_of(media::decode_image(bytes_of(jpeg))); })));
    OMNI_RETURN_IF_ERROR(add(measure(options, "  resize bicubic", "Pillow-exact", [&]() -> Status {
        return status_of(media::resize_bicubic(decoded, size.width, size.height));
    })));
    OMNI_RETURN_IF_ERROR(add(measure(options, "  patchify + normalise", "", [&]() -> Status {
        return status_of(media::patchify_frames(std::span<const media::RgbImage>(&resized, 1)));
    })));
    const std::size_t patch_bytes = reference.pixels.size() * sizeof(float);
    std::vector<char> source(patch_bytes, 1), target(patch_bytes);
    OMNI_RETURN_IF_ERROR(add(measure(
        options, "  ceiling: memcpy",
        "pixel_values bytes (" + std::to_string(patch_bytes >> 20) + " MiB)", [&]() -> Status {
            std::memcpy(target.data(), source.data(), patch_bytes);
            if (target[patch_bytes / 2] != 1) return fail(ErrorCode::internal, "memcpy");
            return ok_status();
        })));

    // Audio.
    std::vector<float> audio(static_cast<std::size_t>(media::kWhisperSampleRate) * 30);
    std::uint32_t state = 7;
    for (std::size_t i = 0; i < audio.size(); ++i) {
        state = state * 1664525u + 1013904223u;
        audio[i] = 0.3f * static_cast<float>(std::sin(2 * std::numbers::pi * 220.0 * i / 16000.0)) +
                   0.05f * (static_cast<float>(state >> 8) / 16777216.0f - 0.5f);
    }
    OMNI_RETURN_IF_ERROR(
        add(measure(options, "mel: 30 s -> log-mel", "128 x 3000",
                    [&]() -> Status { return status_of(media::whisper_log_mel(audio)); })));

    // Video.
    if (!options.video_path.empty()) {
        std::ifstream in(options.video_path, std::ios::binary);
        const std::string video{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
        if (video.empty()) {
            return fail(ErrorCode::invalid_argument, "cannot read " + options.video_path);
        }
        OMNI_TRY(const media::VideoInput first, media::preprocess_video(bytes_of(video)));
        const std::string detail = std::to_string(first.total_frames) + " frames -> " +
                                   std::to_string(first.frame_indices.size()) + " sampled, grid " +
                                   std::to_string(first.patches.grid_t) + "x" +
                                   std::to_string(first.patches.grid_h) + "x" +
                                   std::to_string(first.patches.grid_w);
        OMNI_RETURN_IF_ERROR(
            add(measure(options, "video: file -> pixel_values", detail, [&]() -> Status {
                return status_of(media::preprocess_video(bytes_of(video)));
            })));
    }
    return report;
}

std::string format_media_table(const MediaBenchReport& report) {
    std::ostringstream out;
    char line[256];
    std::snprintf(line, sizeof(line), "%-30s %10s %10s  %s\n", "case", "best ms", "median ms",
                  "detail");
    out << line;
    for (const MediaBenchCase& c : report.cases) {
        std::snprintf(line, sizeof(line), "%-30s %10.2f %10.2f  %s\n", c.name.c_str(), c.best_ms,
                      c.median_ms, c.detail.c_str());
        out << line;
    }
    out << "(" << report.iterations << " measured runs per case, one thread)\n";
    return out.str();
}

std::string media_report_json(const MediaBenchReport& report) {
    nlohmann::json cases = nlohmann::json::array();
    for (const MediaBenchCase& c : report.cases) {
        cases.push_back({{"name", c.name},
                         {"detail", c.detail},
                         {"best_ms", c.best_ms},
                         {"median_ms", c.median_ms}});
    }
    return nlohmann::json{{"iterations", report.iterations}, {"cases", cases}}.dump(2) + "\n";
}

}  // namespace omnirt::bench
