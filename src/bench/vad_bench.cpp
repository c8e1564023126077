#include "bench/vad_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <numbers>
#include <sstream>

#include "bench/memory_bandwidth.h"
#include "vad/silero_vad.h"
#include "vad/turn_detector.h"

namespace omnirt::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Multiply-adds of one window (see src/vad/silero_weights.h): the STFT (258 x 256 x 4 frames),
// the four encoder convolutions (out x in x 3 x positions), the LSTM cell (512 x 256) and the
// head (128). The network's cost does not depend on the audio.
constexpr std::int64_t kMacsPerWindow = 258LL * 256 * 4 + 128LL * 129 * 3 * 4 + 64LL * 128 * 3 * 2 +
                                        64LL * 64 * 3 * 1 + 128LL * 64 * 3 * 1 + 512LL * 256 + 128;
// The float32 weights the kernel reads per window, rows padded to 8 floats.
constexpr std::int64_t kWeightBytes =
    4 * (258LL * 256 + 128LL * 392 + 64LL * 384 + 64LL * 192 + 128LL * 192 + 512LL * 256 + 128);

// Speech-like test audio: a 140 Hz voice with harmonics, syllables of 250 ms separated by pauses,
// over low noise (the network's cost does not depend on it, the turn detector's events do).
std::vector<float> test_audio(int rate, double seconds) {
    std::vector<float> audio(static_cast<std::size_t>(rate * seconds));
    std::uint32_t state = 7;
    for (std::size_t i = 0; i < audio.size(); ++i) {
        const double t = static_cast<double>(i) / rate;
        state = state * 1664525u + 1013904223u;
        const double noise = 0.01 * (static_cast<double>(state >> 8) / 16777216.0 - 0.5);
        const bool voiced = std::fmod(t, 0.4) < 0.25 && std::fmod(t, 6.0) < 4.0;
        double voice = 0;
        if (voiced) {
            for (int h = 1; h <= 6; ++h)
                voice += std::sin(2 * std::numbers::pi * 140.0 * h * t) / h;
        }
        audio[i] = static_cast<float>(0.2 * voice + noise);
    }
    return audio;
}

std::vector<std::int16_t> to_pcm16(const std::vector<float>& audio) {
    std::vector<std::int16_t> pcm(audio.size());
    for (std::size_t i = 0; i < audio.size(); ++i) {
        pcm[i] = static_cast<std::int16_t>(std::lround(std::clamp(audio[i], -1.0f, 1.0f) * 32767));
    }
    return pcm;
}

VadBenchCase measure(const VadBenchOptions& options, std::string name, std::string detail,
                     double audio_seconds, const std::function<void()>& body) {
    std::vector<double> times;
    for (int i = 0; i < options.warmup + options.iterations; ++i) {
        const auto start = Clock::now();
        body();
        const auto end = Clock::now();
        if (i >= options.warmup) {
            times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
        }
    }
    std::sort(times.begin(), times.end());
    return VadBenchCase{.name = std::move(name),
                        .detail = std::move(detail),
                        .best_ms = times.front(),
                        .median_ms = times[times.size() / 2],
                        .realtime_factor = audio_seconds * 1000.0 / times.front()};
}

}  // namespace

Result<VadBenchReport> run_vad_bench(const VadBenchOptions& options) {
    if (!(options.seconds >= 1 && options.seconds <= 3600) || options.iterations < 1 ||
        options.warmup < 0) {
        return fail(ErrorCode::invalid_argument,
                    "bench vad: seconds in [1, 3600], iterations >= 1, warmup >= 0");
    }
    VadBenchReport report;
    report.iterations = options.iterations;
    const std::string path =
        options.model_path.empty() ? vad::default_model_path() : options.model_path;
    const auto load_start = Clock::now();
    OMNI_TRY(auto model, vad::SileroModel::load(path));
    report.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();

    const std::vector<float> audio16 = test_audio(vad::SileroModel::kSampleRate, options.seconds);
    const std::int64_t windows =
        static_cast<std::int64_t>(audio16.size()) / vad::SileroModel::kWindow;
    report.windows = windows;
    report.audio_seconds =
        static_cast<double>(windows * vad::SileroModel::kWindow) / vad::SileroModel::kSampleRate;

    vad::SileroStream stream(model);
    float sink = 0;
    report.cases.push_back(
        measure(options, "silero: 512-sample windows",
                std::to_string(windows) + " windows x " + std::to_string(kMacsPerWindow / 1000) +
                    "k multiply-adds",
                report.audio_seconds, [&] {
                    stream.reset();
                    for (std::int64_t w = 0; w < windows; ++w) {
                        sink += stream.process(std::span<const float>(audio16).subspan(
                            static_cast<std::size_t>(w) * vad::SileroModel::kWindow,
                            vad::SileroModel::kWindow));
                    }
                }));
    report.gflops =
        2.0 * static_cast<double>(kMacsPerWindow * windows) / (report.cases.back().best_ms * 1e6);

    for (int rate : {24000, 16000}) {
        const std::vector<std::int16_t> pcm = to_pcm16(test_audio(rate, options.seconds));
        const std::size_t piece = static_cast<std::size_t>(rate / 50);  // 20 ms
        std::size_t events = 0;
        OMNI_TRY(auto detector, vad::TurnDetector::create(model, {}, rate));
        VadBenchCase c = measure(
            options, "turn: pcm16 " + std::to_string(rate / 1000) + " kHz, 20 ms pieces", "",
            options.seconds, [&] {
                detector.reset();
                events = 0;
                for (std::size_t offset = 0; offset < pcm.size(); offset += piece) {
                    const std::size_t size = std::min(piece, pcm.size() - offset);
                    events +=
                        detector.feed(std::span<const std::int16_t>(pcm).subspan(offset, size))
                            .size();
                }
            });
        c.detail = std::to_string(events) + " events per run";
        report.cases.push_back(std::move(c));
    }

    // The ceiling: reading the weight bytes once per window from where they live between windows
    // (L2 / L3: 1.2 MB), at the read bandwidth measured for a buffer of that size.
    OMNI_TRY(const ReadBandwidth read,
             measure_read_bandwidth({.bytes = static_cast<std::size_t>(kWeightBytes),
                                     .threads = 1,
                                     .passes = 20 * (options.iterations + options.warmup)}));
    const double read_ms = static_cast<double>(kWeightBytes * windows) / (read.best_gbps * 1e6);
    const double read_median_ms =
        static_cast<double>(kWeightBytes * windows) / (read.median_gbps * 1e6);
    char detail[128];
    std::snprintf(detail, sizeof(detail), "%lld KiB once per window at %.1f GB/s",
                  static_cast<long long>(kWeightBytes / 1024), read.best_gbps);
    report.cases.push_back(VadBenchCase{.name = "ceiling: read the weights",
                                        .detail = detail,
                                        .best_ms = read_ms,
                                        .median_ms = read_median_ms,
                                        .realtime_factor = report.audio_seconds * 1000 / read_ms});
    if (!std::isfinite(sink)) return fail(ErrorCode::internal, "bench vad: non-finite output");
    return report;
}

std::string format_vad_table(const VadBenchReport& report) {
    std::ostringstream out;
    char line[256];
    std::snprintf(line, sizeof(line), "%-36s %10s %10s %10s  %s\n", "case", "best ms", "median ms",
                  "x realtime", "detail");
    out << line;
    for (const VadBenchCase& c : report.cases) {
        std::snprintf(line, sizeof(line), "%-36s %10.2f %10.2f %10.0f  %s\n", c.name.c_str(),
                      c.best_ms, c.median_ms, c.realtime_factor, c.detail.c_str());
        out << line;
    }
    std::snprintf(line, sizeof(line),
                  "(%.0f s of audio per run, %d measured runs per case, one thread; network "
                  "%.1f GFLOP/s; model load %.1f ms)\n",
                  report.audio_seconds, report.iterations, report.gflops, report.load_ms);
    out << line;
    return out.str();
}

std::string vad_report_json(const VadBenchReport& report) {
    nlohmann::json cases = nlohmann::json::array();
    for (const VadBenchCase& c : report.cases) {
        cases.push_back({{"name", c.name},
                         {"detail", c.detail},
                         {"best_ms", c.best_ms},
                         {"median_ms", c.median_ms},
                         {"realtime_factor", c.realtime_factor}});
    }
    return nlohmann::json{{"audio_seconds", report.audio_seconds},
                          {"windows", report.windows},
                          {"iterations", report.iterations},
                          {"gflops", report.gflops},
                          {"load_ms", report.load_ms},
                          {"cases", cases}}
               .dump(2) +
           "\n";
}

}  // namespace omnirt::bench
