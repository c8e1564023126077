#include "bench/omni_bench.h"

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "config/load.h"
#include "media/audio.h"
#include "models/builtin_families.h"
#include "runner/builtins.h"
#include "runner/pipeline.h"

namespace omnirt::bench {
namespace {

using Clock = std::chrono::steady_clock;

// An uncompressed 24-bit BMP of seeded pixels (decoding cost is the smallest of the formats;
// bench media measures JPEG decoding).
std::vector<std::uint8_t> bmp(int width, int height, std::uint32_t seed) {
    const int stride = (width * 3 + 3) / 4 * 4;
    std::vector<std::uint8_t> out(54 + static_cast<std::size_t>(stride) * height, 0);
    auto put32 = [&](std::size_t at, std::uint32_t v) {
        for (int i = 0; i < 4; ++i) out[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
    };
    out[0] = 'B';
    out[1] = 'M';
    put32(2, static_cast<std::uint32_t>(out.size()));
    put32(10, 54);
    put32(14, 40);
    put32(18, static_cast<std::uint32_t>(width));
    put32(22, static_cast<std::uint32_t>(height));
    out[26] = 1;
    out[28] = 24;
    std::uint32_t state = seed;
    for (std::size_t i = 54; i < out.size(); ++i) {
        state = state * 1664525u + 1013904223u;
        out[i] = static_cast<std::uint8_t>(state >> 24);
    }
    return out;
}

Result<std::vector<std::uint8_t>> wav(double seconds) {
    media::AudioBuffer buffer{.sample_rate = 16000, .channels = 1};
    const auto n = static_cast<std::size_t>(seconds * 16000);
    buffer.samples.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        buffer.samples[i] = static_cast<float>(0.3 * std::sin(0.05 * static_cast<double>(i)));
    }
    OMNI_TRY(std::string encoded, media::encode_audio(buffer, media::AudioFormat::wav));
    return std::vector<std::uint8_t>(encoded.begin(), encoded.end());
}

Value media_part(const std::string& type, std::vector<std::uint8_t> bytes) {
    return Value(Map{{"type", Value(type)},
                     {"source", Value("bytes")},
                     {"data", Value(Bytes{std::move(bytes)})}});
}

Result<OmniRequest> make_request(const OmniBenchOptions& options, int index) {
    List content;
    for (int i = 0; i < options.images; ++i) {
        // Distinct pixels per request and image: the encoder cache never answers.
        content.push_back(
            media_part("image", bmp(options.image_width, options.image_height,
                                    static_cast<std::uint32_t>(index * 131 + i * 7 + 1))));
    }
    if (options.audio_seconds > 0) {
        OMNI_TRY(std::vector<std::uint8_t> audio, wav(options.audio_seconds));
        audio[44] = static_cast<std::uint8_t>(index);  // distinct content per request
        content.push_back(media_part("audio", std::move(audio)));
    }
    if (!options.video_file.empty()) {
        std::ifstream file(options.video_file, std::ios::binary);
        std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(file)), {});
        if (bytes.empty()) {
            return fail(ErrorCode::invalid_argument, "--video: cannot read " + options.video_file);
        }
        content.push_back(media_part("video", std::move(bytes)));
    }
    content.push_back(Value(Map{{"type", Value("text")}, {"text", Value("Describe it.")}}));
    OmniRequest request;
    request.inputs =
        Value(Map{{"messages", Value(List{Value(Map{{"role", Value("user")},
                                                    {"content", Value(std::move(content))}})})}});
    request.params = Value(Map{{"max_tokens", Value(std::int64_t{1})},
                               {"sampling", Value(Map{{"temperature", Value(0.0)}})}});
    return request;
}

double percentile(std::vector<double> values, double p) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const auto at = static_cast<std::size_t>(p / 100.0 * static_cast<double>(values.size() - 1));
    return values[at];
}

}  // namespace

std::map<std::string, double> stage_compute_ms(const std::filesystem::path& dir,
                                               const std::set<std::string>& measured) {
    std::map<std::string, double> total;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
        std::ifstream file(entry.path());
        auto json = nlohmann::json::parse(file, nullptr, false);
        if (!json.is_object() || !json.contains("traceEvents")) continue;
        for (const auto& event : json["traceEvents"]) {
            const std::string name = event.value("name", "");
            if (name != "compute" && name != "forward") continue;
            const auto& args = event.contains("args") ? event["args"] : nlohmann::json::object();
            const std::string request = args.value("request_id", "");
            const std::string stage = args.value("stage", "");
            if (!measured.contains(request)) continue;
            total[stage] += event.value("dur", 0.0) / 1000.0;
        }
    }
    return total;
}

Result<OmniBenchReport> run_omni_bench(const OmniBenchOptions& options) {
    if (options.concurrency < 1 || options.requests < 1 || options.warmup < 0) {
        return fail(ErrorCode::invalid_argument,
                    "--concurrency and --requests must be positive, --warmup not negative");
    }
    if (options.images < 0 || options.images > 64 || options.image_width < 1 ||
        options.image_height < 1 || options.audio_seconds < 0 || options.audio_seconds > 1200) {
        return fail(ErrorCode::invalid_argument, "media options out of range");
    }
    OMNI_RETURN_IF_ERROR(runner::register_builtins());
    const std::filesystem::path work = std::filesystem::temp_directory_path() /
                                       ("omnirt-bench-omni-" + std::to_string(::getpid()));
    std::filesystem::create_directories(work / "trace");
    struct Cleanup {
        std::filesystem::path path;
        ~Cleanup() {
            std::error_code ignored;
            std::filesystem::remove_all(path, ignored);
        }
    } cleanup{work};
    std::string model_path = options.model_path;
    if (model_path.empty()) {
        OMNI_TRY(const models::ModelFamily* family, models::builtin_families().find("qwen3_omni"));
        model_path = (work / "checkpoint").string();
        OMNI_TRY(auto made, family->make_checkpoint(
                                model_path, {.arch = family->name, .preset = options.preset}));
        (void)made;
    }
    std::string config_path = options.config_path;
    if (config_path.empty()) {
        const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe");
        config_path =
            (exe.parent_path().parent_path().parent_path() / "configs/qwen3_omni_thinker.yaml")
                .string();
    }
    config::LoadOptions load;
    load.overrides.push_back("model_path=" + model_path);
    OMNI_TRY(config::PipelineConfig config, config::load_pipeline_file(config_path, load));
    OMNI_TRY(auto pipeline,
             runner::Pipeline::start(config, {.placement = runner::Placement::in_process}));

    std::mutex mutex;
    std::condition_variable done;
    std::vector<double> ttft_ms;
    std::set<std::string> measured_ids;
    int finished = 0;
    int in_flight = 0;
    int failed = 0;
    std::optional<Error> first_error;
    Clock::time_point measure_start = Clock::now();
    Clock::time_point last_end = measure_start;
    const int total = options.warmup + options.requests;
    // A closed loop: this thread builds each request (media encoding is CPU work that must not
    // run on the coordinator's IO thread) and starts it when a slot is free.
    for (int index = 0; index < total; ++index) {
        OMNI_TRY(OmniRequest request, make_request(options, index));
        {
            std::unique_lock lock(mutex);
            done.wait(lock, [&] { return in_flight < options.concurrency; });
            if (index == options.warmup) {
                measure_start = Clock::now();
                (void)pipeline->coordinator().start_profile((work / "trace" / "t.json").string());
            }
            ++in_flight;
        }
        const std::string id = "omni-bench-" + std::to_string(index);
        const auto start = Clock::now();
        auto started = pipeline->coordinator().start_request(
            id, std::move(request), {}, [&, index, id, start](pipeline::RequestEvent event) {
                if (!event.terminal()) return;
                std::lock_guard lock(mutex);
                ++finished;
                --in_flight;
                last_end = Clock::now();
                if (event.kind != pipeline::RequestEvent::Kind::completed) {
                    ++failed;
                    if (!first_error) first_error = event.error;
                } else if (index >= options.warmup) {
                    ttft_ms.push_back(
                        std::chrono::duration<double, std::milli>(last_end - start).count());
                    measured_ids.insert(id);
                }
                done.notify_all();
            });
        if (!started) {
            std::lock_guard lock(mutex);
            ++finished;
            --in_flight;
            ++failed;
            if (!first_error) first_error = started.error();
        }
    }
    {
        std::unique_lock lock(mutex);
        done.wait(lock, [&] { return finished >= total; });
    }
    (void)pipeline->coordinator().stop_profile();
    pipeline->stop();
    if (failed > 0 && ttft_ms.empty()) return fail(*first_error);

    OmniBenchReport report{.options = options};
    report.measured = static_cast<int>(ttft_ms.size());
    report.failed = failed;
    report.ttft_p50_ms = percentile(ttft_ms, 50);
    double sum = 0;
    for (double value : ttft_ms) sum += value;
    report.ttft_mean_ms = ttft_ms.empty() ? 0 : sum / static_cast<double>(ttft_ms.size());
    const double seconds = std::chrono::duration<double>(last_end - measure_start).count();
    report.requests_per_second = seconds > 0 ? report.measured / seconds : 0;
    const int items =
        options.images + (options.audio_seconds > 0 ? 1 : 0) + (options.video_file.empty() ? 0 : 1);
    report.encoder_items_per_second = report.requests_per_second * items;
    std::map<std::string, double> compute = stage_compute_ms(work / "trace", measured_ids);
    double path_ms = 0;
    double encoders_ms = 0;
    for (auto& [stage, ms] : compute) {
        ms /= std::max(1, report.measured);
        report.stage_ms[stage] = ms;
        if (stage.find("encoder") != std::string::npos) {
            encoders_ms = std::max(encoders_ms, ms);  // the encoders run side by side
        } else {
            path_ms += ms;
        }
    }
    report.runtime_ms = report.ttft_mean_ms - path_ms - encoders_ms;
    return report;
}

std::string format_omni_table(const OmniBenchReport& report) {
    const auto& o = report.options;
    std::string out;
    char line[512];
    std::snprintf(line, sizeof line,
                  "omni bench: preset %s, %d image(s) %dx%d, audio %.1f s%s, concurrency %d\n",
                  o.model_path.empty() ? o.preset.c_str() : o.model_path.c_str(), o.images,
                  o.image_width, o.image_height, o.audio_seconds,
                  o.video_file.empty() ? "" : (", video " + o.video_file).c_str(), o.concurrency);
    out += line;
    std::snprintf(line, sizeof line, "%9s %7s %12s %12s %12s %14s %12s\n", "requests", "failed",
                  "TTFT p50 ms", "TTFT mean", "requests/s", "enc. items/s", "runtime ms");
    out += line;
    std::snprintf(line, sizeof line, "%9d %7d %12.2f %12.2f %12.2f %14.2f %12.2f\n",
                  report.measured, report.failed, report.ttft_p50_ms, report.ttft_mean_ms,
                  report.requests_per_second, report.encoder_items_per_second, report.runtime_ms);
    out += line;
    out += "compute per request (ms):";
    for (const auto& [stage, ms] : report.stage_ms) {
        std::snprintf(line, sizeof line, " %s %.2f", stage.c_str(), ms);
        out += line;
    }
    out += "\n";
    return out;
}

std::string omni_report_json(const OmniBenchReport& report) {
    const auto& o = report.options;
    nlohmann::json json = {{"preset", o.preset},
                           {"model_path", o.model_path},
                           {"images", o.images},
                           {"image_size", {o.image_width, o.image_height}},
                           {"audio_seconds", o.audio_seconds},
                           {"video_file", o.video_file},
                           {"concurrency", o.concurrency},
                           {"measured", report.measured},
                           {"failed", report.failed},
                           {"ttft_p50_ms", report.ttft_p50_ms},
                           {"ttft_mean_ms", report.ttft_mean_ms},
                           {"requests_per_second", report.requests_per_second},
                           {"encoder_items_per_second", report.encoder_items_per_second},
                           {"stage_ms", report.stage_ms},
                           {"runtime_ms", report.runtime_ms}};
    return json.dump(2) + "\n";
}

}  // namespace omnirt::bench
