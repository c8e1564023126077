#include "bench/speech_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>

#include "bench/omni_bench.h"
#include "bench/relay_bench.h"
#include "config/load.h"
#include "config/plugins.h"
#include "models/builtin_families.h"
#include "pipeline/stage_factory.h"
#include "runner/builtins.h"
#include "runner/pipeline.h"

namespace omnirt::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kQuantizers = 16;
constexpr std::int64_t kCodebookSize = 2048;  // the released code2wav_config.codebook_size

double ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
}
double seconds_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
}

// What one stream (or request) saw.
struct StreamRecord {
    Clock::time_point start;
    std::optional<Clock::time_point> first_audio;
    Clock::time_point end;
    double audio_seconds = 0;
    double inverse_rows = 0;  // sum over its chunks of 1 / batch_rows
    std::int64_t chunks = 0;
    bool failed = false;
};

// The level's figures from its measured streams and its wall time.
SpeechLevel summarize(int concurrency, const std::vector<StreamRecord>& streams, double wall,
                      double frame_rate = kSpeechFramesPerSecond) {
    SpeechLevel level{.concurrency = concurrency};
    std::vector<double> ttfa;
    std::vector<double> rtf;
    double inverse_rows = 0;
    std::int64_t chunks = 0;
    for (const StreamRecord& stream : streams) {
        if (stream.failed) {
            ++level.failed;
            continue;
        }
        ++level.streams;
        level.audio_seconds += stream.audio_seconds;
        if (stream.first_audio) ttfa.push_back(ms_between(stream.start, *stream.first_audio));
        if (stream.audio_seconds > 0) {
            rtf.push_back(seconds_between(stream.start, stream.end) / stream.audio_seconds);
        }
        inverse_rows += stream.inverse_rows;
        chunks += stream.chunks;
    }
    level.ttfa_p50_ms = percentile(ttfa, 50);
    level.ttfa_p99_ms = percentile(ttfa, 99);
    level.rtf_p50 = percentile(rtf, 50);
    level.rtf_p99 = percentile(rtf, 99);
    if (level.audio_seconds > 0) level.rtf_aggregate = wall / level.audio_seconds;
    if (wall > 0) level.frames_per_second = level.audio_seconds * frame_rate / wall;
    if (inverse_rows > 0) level.rows_per_forward = static_cast<double>(chunks) / inverse_rows;
    return level;
}

// <build> from the running binary (<build>/bin/omnirt or <build>/tests/<test>).
fs::path build_directory() {
    return fs::read_symlink("/proc/self/exe").parent_path().parent_path();
}

// A checkpoint directory for the preset: "real" writes only config.json (the stage loads dummy
// weights at its sizes), the others are generated checkpoints.
Result<std::string> checkpoint_for(const SpeechBenchOptions& options, const fs::path& work) {
    if (!options.model_path.empty()) return options.model_path;
    OMNI_TRY(const models::ModelFamily* family, models::builtin_families().find(options.pipeline));
    const fs::path directory = work / "checkpoint";
    if (options.preset == "real") {
        OMNI_TRY(nlohmann::json config, family->preset_config("30b-a3b", "bfloat16"));
        fs::create_directories(directory);
        std::ofstream out(directory / "config.json");
        out << config.dump(2);
        if (!out) return fail(ErrorCode::internal, "cannot write " + directory.string());
        return directory.string();
    }
    OMNI_TRY(auto made, family->make_checkpoint(directory.string(),
                                                {.arch = family->name, .preset = options.preset}));
    (void)made;
    return directory.string();
}

// Random codes [frames, 16] as one stream chunk.
Value random_codes(std::int64_t frames, std::mt19937_64& rng) {
    std::vector<std::int64_t> codes(static_cast<std::size_t>(frames * kQuantizers));
    for (std::int64_t& code : codes) code = static_cast<std::int64_t>(rng() % kCodebookSize);
    return Value(Map{{"codes", Value(Tensor::from_vector(codes, {frames, kQuantizers}))}});
}

// Runs `count` streams through the started stage, `concurrency` in flight, every frame of a
// stream queued when it starts. The stage's outputs are read on this thread.
Result<std::vector<StreamRecord>> run_code2wav_streams(pipeline::Scheduler& stage,
                                                       const std::string& prefix, int count,
                                                       int concurrency, std::int64_t frames,
                                                       std::mt19937_64& rng) {
    std::vector<StreamRecord> records(static_cast<std::size_t>(count));
    std::map<std::string, std::size_t> index_of;
    int started = 0;
    int finished = 0;
    auto start_one = [&]() -> Status {
        const std::string id = prefix + std::to_string(started);
        index_of[id] = static_cast<std::size_t>(started);
        Value codes = random_codes(frames, rng);  // made before the clock starts
        records[static_cast<std::size_t>(started)].start = Clock::now();
        ++started;
        const bool pushed =
            stage.inbox().push(pipeline::IncomingMessage{
                .request_id = id,
                .kind = pipeline::IncomingKind::new_request,
                .payload = std::make_shared<const StagePayload>(
                    StagePayload{.request_id = id, .data = Value(Map{})})}) &&
            stage.inbox().push(pipeline::IncomingMessage{
                .request_id = id,
                .kind = pipeline::IncomingKind::stream_chunk,
                .chunk = std::make_shared<const pipeline::StreamChunk>(
                    pipeline::StreamChunk{.chunk_id = 0, .chunk = std::move(codes)}),
                .from_stage = "talker"}) &&
            stage.inbox().push(
                pipeline::IncomingMessage{.request_id = id,
                                          .kind = pipeline::IncomingKind::stream_done,
                                          .from_stage = "talker"});
        if (!pushed) return fail(ErrorCode::internal, "the code2wav stage stopped");
        return ok_status();
    };
    while (started < std::min(count, concurrency)) OMNI_RETURN_IF_ERROR(start_one());
    std::optional<Error> first_error;
    while (finished < count) {
        std::optional<pipeline::OutgoingMessage> message = stage.outbox().pop();
        if (!message) return fail(ErrorCode::internal, "the code2wav stage stopped");
        const auto found = index_of.find(message->request_id);
        if (found == index_of.end()) continue;
        StreamRecord& record = records[found->second];
        const Clock::time_point now = Clock::now();
        if (message->kind == pipeline::OutgoingKind::stream) {
            if (!record.first_audio) record.first_audio = now;
            const Value& chunk = message->chunk->chunk;
            const Value* audio = chunk.find("audio");
            const Value* rate = chunk.find("sample_rate");
            if (audio != nullptr && audio->is_tensor() && rate != nullptr && rate->is_int() &&
                rate->as_int() > 0) {
                record.audio_seconds += static_cast<double>(audio->as_tensor().numel()) /
                                        static_cast<double>(rate->as_int());
            }
            const Value* rows = message->chunk->metadata.find("batch_rows");
            if (rows != nullptr && rows->is_int() && rows->as_int() > 0) {
                record.inverse_rows += 1.0 / static_cast<double>(rows->as_int());
                ++record.chunks;
            }
            continue;
        }
        record.end = now;
        if (message->kind == pipeline::OutgoingKind::error) {
            record.failed = true;
            if (!first_error) first_error = message->error;
        }
        ++finished;
        if (started < count) OMNI_RETURN_IF_ERROR(start_one());
    }
    if (first_error && std::all_of(records.begin(), records.end(),
                                   [](const StreamRecord& r) { return r.failed; })) {
        return fail(*first_error);
    }
    return records;
}

Result<SpeechBenchReport> run_code2wav_only(const SpeechBenchOptions& options,
                                            const fs::path& work) {
    OMNI_TRY(std::string model_path, checkpoint_for(options, work));
    const std::string plugin =
        options.plugin_path.empty()
            ? (build_directory() / "lib/libomnirt_qwen3_omni_plugin.so").string()
            : options.plugin_path;
    OMNI_RETURN_IF_ERROR(config::load_plugins({plugin}, Registry::global()));
    OMNI_TRY(pipeline::StageFactory factory, pipeline::find_stage_factory("qwen3_omni.code2wav"));
    Map args{{"model_path", Value(model_path)},
             {"dtype", Value(options.dtype)},
             {"max_batch_streams", Value(std::int64_t{options.max_batch_streams})}};
    if (options.preset == "real" && options.model_path.empty()) {
        args.emplace("load_format", Value(std::string("dummy")));
    }
    if (options.first_chunk_frames > 0) {
        args.emplace("first_chunk_frames", Value(std::int64_t{options.first_chunk_frames}));
    }
    OMNI_TRY(std::unique_ptr<pipeline::Scheduler> stage,
             factory(pipeline::StageContext{
                 .stage_name = "code2wav", .args = std::move(args), .stream_sources = {"talker"}}));
    OMNI_RETURN_IF_ERROR(stage->start());
    struct Stop {
        pipeline::Scheduler& stage;
        ~Stop() { stage.stop(); }
    } stop{*stage};

    const auto frames = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(options.audio_seconds * kSpeechFramesPerSecond + 0.5));
    std::mt19937_64 rng(7);
    SpeechBenchReport report{.options = options, .cpu = cpu_model()};
    if (options.warmup > 0) {
        OMNI_TRY(auto warm,
                 run_code2wav_streams(*stage, "warmup-", options.warmup, 1, frames, rng));
        (void)warm;
    }
    for (int concurrency : options.concurrency) {
        const int count = std::max(options.requests, concurrency);
        const auto compute_before = stage->compute_time();
        const Clock::time_point start = Clock::now();
        OMNI_TRY(std::vector<StreamRecord> records,
                 run_code2wav_streams(*stage,
                                      std::to_string(report.levels.size()) + "-c" +
                                          std::to_string(concurrency) + "-",
                                      count, concurrency, frames, rng));
        const double wall = seconds_between(start, Clock::now());
        SpeechLevel level = summarize(concurrency, records, wall);
        if (level.audio_seconds > 0) {
            level.compute_rtf =
                std::chrono::duration<double>(stage->compute_time() - compute_before).count() /
                level.audio_seconds;
        }
        report.levels.push_back(std::move(level));
    }
    return report;
}

// S2-Pro vocoder only: random frames [10] (c_0 below 4096, the residual codes below 1024), one
// stream chunk each, as s2_pro.tts streams them.
Value random_s2_pro_frame(std::mt19937_64& rng) {
    std::vector<std::int64_t> codes(10);
    for (std::size_t k = 0; k < codes.size(); ++k) {
        codes[k] = static_cast<std::int64_t>(rng() % (k == 0 ? 4096 : 1024));
    }
    return Value(Map{{"codes", Value(Tensor::from_vector(codes, {10}))}});
}

double process_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

double load_average() {
    double load[1] = {0};
    return getloadavg(load, 1) == 1 ? load[0] : 0;
}

// One stream through the started vocoder: every frame queued at once, so the time between two
// audio chunks is the stage's work on the second. Fills `record` and returns the chunks' costs.
Result<std::vector<VocoderChunkCost>> run_vocoder_stream(pipeline::Scheduler& stage,
                                                         const std::string& id, std::int64_t frames,
                                                         std::mt19937_64& rng,
                                                         StreamRecord& record) {
    std::vector<Value> chunks;
    for (std::int64_t i = 0; i < frames; ++i) chunks.push_back(random_s2_pro_frame(rng));
    record.start = Clock::now();
    bool pushed = stage.inbox().push(
        pipeline::IncomingMessage{.request_id = id,
                                  .kind = pipeline::IncomingKind::new_request,
                                  .payload = std::make_shared<const StagePayload>(
                                      StagePayload{.request_id = id, .data = Value(Map{})})});
    for (std::int64_t i = 0; pushed && i < frames; ++i) {
        pushed = stage.inbox().push(pipeline::IncomingMessage{
            .request_id = id,
            .kind = pipeline::IncomingKind::stream_chunk,
            .chunk = std::make_shared<const pipeline::StreamChunk>(
                pipeline::StreamChunk{.chunk_id = i, .chunk = std::move(chunks[i])}),
            .from_stage = "tts"});
    }
    pushed =
        pushed &&
        stage.inbox().push(pipeline::IncomingMessage{
            .request_id = id, .kind = pipeline::IncomingKind::stream_done, .from_stage = "tts"});
    if (!pushed) return fail(ErrorCode::internal, "the vocoder stage stopped");
    std::vector<VocoderChunkCost> costs;
    Clock::time_point last = record.start;
    double last_cpu = process_cpu_seconds();
    while (true) {
        std::optional<pipeline::OutgoingMessage> message = stage.outbox().pop();
        if (!message) return fail(ErrorCode::internal, "the vocoder stage stopped");
        if (message->request_id != id) continue;
        const Clock::time_point now = Clock::now();
        const double cpu = process_cpu_seconds();
        if (message->kind == pipeline::OutgoingKind::error) return fail(message->error);
        if (message->kind == pipeline::OutgoingKind::result) {
            record.end = now;
            return costs;
        }
        if (!record.first_audio) record.first_audio = now;
        const Value* audio = message->chunk->chunk.find("audio");
        if (audio == nullptr || !audio->is_tensor()) continue;
        const double seconds = static_cast<double>(audio->as_tensor().numel()) / 44100.0;
        record.audio_seconds += seconds;
        costs.push_back(
            VocoderChunkCost{.index = static_cast<int>(costs.size()),
                             .frames = audio->as_tensor().numel() / 2048,
                             .audio_end_s = record.audio_seconds,
                             .ms = std::chrono::duration<double, std::milli>(now - last).count(),
                             .cpu_ms = 1000.0 * (cpu - last_cpu)});
        last = now;
        last_cpu = cpu;
    }
}

Result<SpeechBenchReport> run_vocoder_only(const SpeechBenchOptions& options) {
    const std::string plugin = options.plugin_path.empty()
                                   ? (build_directory() / "lib/libomnirt_s2_pro_plugin.so").string()
                                   : options.plugin_path;
    OMNI_RETURN_IF_ERROR(config::load_plugins({plugin}, Registry::global()));
    OMNI_TRY(pipeline::StageFactory factory, pipeline::find_stage_factory("s2_pro.vocoder"));
    Map args;
    if (options.model_path.empty()) {
        args.emplace("load_format", Value(std::string("dummy")));
        args.emplace("codec_preset",
                     Value(options.preset == "real" ? std::string("release") : options.preset));
    } else {
        args.emplace("model_path", Value(options.model_path));
    }
    if (options.first_chunk_frames > 0) {
        args.emplace("first_chunk_frames", Value(std::int64_t{options.first_chunk_frames}));
    }
    if (options.chunk_frames > 0) {
        args.emplace("chunk_frames", Value(std::int64_t{options.chunk_frames}));
    }
    args.emplace("dtype", Value(options.dtype));
    OMNI_TRY(std::unique_ptr<pipeline::Scheduler> stage,
             factory(pipeline::StageContext{
                 .stage_name = "vocoder", .args = std::move(args), .stream_sources = {"tts"}}));
    OMNI_RETURN_IF_ERROR(stage->start());
    struct Stop {
        pipeline::Scheduler& stage;
        ~Stop() { stage.stop(); }
    } stop{*stage};
    const auto frames = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(options.audio_seconds * kS2ProFramesPerSecond + 0.5));
    std::mt19937_64 rng(7);
    SpeechBenchReport report{.options = options, .cpu = cpu_model()};
    for (int i = 0; i < options.warmup; ++i) {
        StreamRecord record;
        OMNI_TRY(auto costs,
                 run_vocoder_stream(*stage, "warmup-" + std::to_string(i), frames, rng, record));
        (void)costs;
    }
    std::vector<StreamRecord> records(static_cast<std::size_t>(options.requests));
    const auto compute_before = stage->compute_time();
    report.load_before = load_average();
    const double cpu_before = process_cpu_seconds();
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < options.requests; ++i) {
        OMNI_TRY(report.chunk_costs, run_vocoder_stream(*stage, "s" + std::to_string(i), frames,
                                                        rng, records[static_cast<std::size_t>(i)]));
    }
    report.cpu_seconds = process_cpu_seconds() - cpu_before;
    report.load_after = load_average();
    SpeechLevel level =
        summarize(1, records, seconds_between(start, Clock::now()), kS2ProFramesPerSecond);
    if (level.audio_seconds > 0) {
        level.compute_rtf =
            std::chrono::duration<double>(stage->compute_time() - compute_before).count() /
            level.audio_seconds;
    }
    report.levels.push_back(std::move(level));
    return report;
}

// A speech request for S2-Pro: max_frames frames at most, greedy, and the reference clip (a
// 220 Hz tone of reference_seconds at 44.1 kHz) when there is one.
OmniRequest s2_pro_request(int max_frames, double reference_seconds, int index) {
    OmniRequest request;
    Map inputs{
        {"text", Value("Say something short about the number " + std::to_string(index) + ".")}};
    if (reference_seconds > 0) {
        const auto count = static_cast<std::int64_t>(reference_seconds * 44100.0);
        std::vector<float> samples(static_cast<std::size_t>(count));
        for (std::int64_t i = 0; i < count; ++i) {
            samples[static_cast<std::size_t>(i)] =
                0.3f * static_cast<float>(std::sin(2.0 * 3.141592653589793 * 220.0 *
                                                   static_cast<double>(i) / 44100.0));
        }
        inputs.emplace("references",
                       Value(List{Value(Map{{"text", Value("A reference clip.")},
                                            {"audio", Value(Tensor::from_vector(samples))},
                                            {"sample_rate", Value(std::int64_t{44100})}})}));
    }
    request.inputs = Value(std::move(inputs));
    request.params = Value(Map{{"max_tokens", Value(std::int64_t{max_frames})},
                               {"sampling", Value(Map{{"temperature", Value(0.0)}})}});
    return request;
}

OmniRequest chat_request(int max_tokens, int max_frames, int index) {
    OmniRequest request;
    const std::string text = "Say something short about the number " + std::to_string(index) + ".";
    request.inputs = Value(
        Map{{"messages",
             Value(List{Value(Map{{"role", Value("user")},
                                  {"content", Value(List{Value(Map{{"type", Value("text")},
                                                                   {"text", Value(text)}})})}})})},
            {"modalities", Value(List{Value("text"), Value("audio")})}});
    Map talker{{"max_tokens", Value(std::int64_t{max_frames})}};
    request.params =
        Value(Map{{"max_tokens", Value(std::int64_t{max_tokens})},
                  {"sampling", Value(Map{{"temperature", Value(0.0)}})},
                  {"stage_sampling", Value(Map{{"talker", Value(std::move(talker))}})}});
    return request;
}

// Runs `count` chat requests, `concurrency` in flight; records their audio. Ids are
// prefix + index.
std::vector<StreamRecord> run_pipeline_requests(runner::Pipeline& pipeline,
                                                const std::string& prefix, int count,
                                                int concurrency,
                                                const std::function<OmniRequest(int)>& make_request,
                                                std::optional<Error>& first_error) {
    std::vector<StreamRecord> records(static_cast<std::size_t>(count));
    std::mutex mutex;
    std::condition_variable done;
    int in_flight = 0;
    int finished = 0;
    for (int index = 0; index < count; ++index) {
        {
            std::unique_lock lock(mutex);
            done.wait(lock, [&] { return in_flight < concurrency; });
            ++in_flight;
            records[static_cast<std::size_t>(index)].start = Clock::now();
        }
        StreamRecord* record = &records[static_cast<std::size_t>(index)];
        auto started = pipeline.coordinator().start_request(
            prefix + std::to_string(index), make_request(index), {},
            [&, record](pipeline::RequestEvent event) {
                const Clock::time_point now = Clock::now();
                std::lock_guard lock(mutex);
                if (!event.terminal()) {
                    const Value* audio = event.chunk.find("audio");
                    const Value* rate = event.chunk.find("sample_rate");
                    if (audio == nullptr || !audio->is_tensor() || rate == nullptr ||
                        !rate->is_int() || rate->as_int() <= 0) {
                        return;
                    }
                    if (!record->first_audio) record->first_audio = now;
                    record->audio_seconds += static_cast<double>(audio->as_tensor().numel()) /
                                             static_cast<double>(rate->as_int());
                    return;
                }
                record->end = now;
                if (event.kind != pipeline::RequestEvent::Kind::completed) {
                    record->failed = true;
                    if (!first_error) first_error = event.error;
                }
                ++finished;
                --in_flight;
                done.notify_all();
            });
        if (!started) {
            std::lock_guard lock(mutex);
            record->failed = true;
            if (!first_error) first_error = started.error();
            ++finished;
            --in_flight;
        }
    }
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return finished >= count; });
    return records;
}

Result<SpeechBenchReport> run_pipeline_mode(const SpeechBenchOptions& options,
                                            const fs::path& work) {
    OMNI_RETURN_IF_ERROR(runner::register_builtins());
    OMNI_TRY(std::string model_path, checkpoint_for(options, work));
    const bool s2_pro = options.pipeline == "s2_pro";
    const std::string config_path =
        options.config_path.empty()
            ? (build_directory().parent_path() /
               (s2_pro ? "configs/s2_pro_tts.yaml" : "configs/qwen3_omni_speech.yaml"))
                  .string()
            : options.config_path;
    config::LoadOptions load;
    load.overrides.push_back("model_path=" + model_path);
    if (options.first_chunk_frames > 0) {
        load.overrides.push_back(
            std::string(s2_pro ? "stages.vocoder" : "stages.code2wav") +
            ".factory_args.first_chunk_frames=" + std::to_string(options.first_chunk_frames));
    }
    const std::function<OmniRequest(int)> make_request = [&options, s2_pro](int index) {
        return s2_pro ? s2_pro_request(options.max_frames, options.reference_seconds, index)
                      : chat_request(options.max_tokens, options.max_frames, index);
    };
    const double frame_rate = s2_pro ? kS2ProFramesPerSecond : kSpeechFramesPerSecond;
    OMNI_TRY(config::PipelineConfig config, config::load_pipeline_file(config_path, load));
    OMNI_TRY(auto pipeline,
             runner::Pipeline::start(config, {.placement = runner::Placement::in_process}));
    SpeechBenchReport report{.options = options, .cpu = cpu_model()};
    std::optional<Error> first_error;
    if (options.warmup > 0) {
        (void)run_pipeline_requests(*pipeline, "speech-warmup-", options.warmup, 1, make_request,
                                    first_error);
    }
    // One recording for every level: the stages write their trace files when the pipeline
    // stops (profiler control is asynchronous); the levels' request ids tell them apart.
    const fs::path trace = work / "trace";
    fs::create_directories(trace);
    (void)pipeline->coordinator().start_profile((trace / "t.json").string());
    std::vector<std::set<std::string>> measured;
    for (int concurrency : options.concurrency) {
        const int count = std::max(options.requests, concurrency);
        // Unique per level (a level may repeat a concurrency): ids are never reused.
        const std::string prefix = "speech-" + std::to_string(report.levels.size()) + "-c" +
                                   std::to_string(concurrency) + "-";
        const Clock::time_point start = Clock::now();
        std::vector<StreamRecord> records =
            run_pipeline_requests(*pipeline, prefix, count, concurrency, make_request, first_error);
        const double wall = seconds_between(start, Clock::now());
        SpeechLevel level = summarize(concurrency, records, wall, frame_rate);
        if (level.streams == 0) {
            pipeline->stop();
            return fail(first_error.value_or(
                Error{ErrorCode::internal, "every request of the level failed"}));
        }
        measured.emplace_back();
        for (int i = 0; i < count; ++i) {
            if (!records[static_cast<std::size_t>(i)].failed) {
                measured.back().insert(prefix + std::to_string(i));
            }
        }
        report.levels.push_back(std::move(level));
    }
    (void)pipeline->coordinator().stop_profile();
    pipeline->stop();
    for (std::size_t i = 0; i < report.levels.size(); ++i) {
        SpeechLevel& level = report.levels[i];
        for (auto [stage, ms] : stage_compute_ms(trace, measured[i])) {
            level.stage_ms[stage] = ms / level.streams;
        }
    }
    return report;
}

}  // namespace

Result<SpeechBenchReport> run_speech_bench(const SpeechBenchOptions& options) {
    if (options.concurrency.empty() || options.requests < 1 || options.warmup < 0 ||
        options.max_tokens < 1 || options.max_frames < 1 || options.first_chunk_frames < 0 ||
        options.audio_seconds <= 0 || options.audio_seconds > 3600 ||
        options.max_batch_streams < 1 || options.max_batch_streams > 256) {
        return fail(ErrorCode::invalid_argument,
                    "--concurrency needs a value, --requests and --max-tokens must be positive, "
                    "--warmup and --first-chunk-frames not negative, --audio-seconds in (0, "
                    "3600], --max-batch-streams in [1, 256]");
    }
    for (int concurrency : options.concurrency) {
        if (concurrency < 1 || concurrency > 4096) {
            return fail(ErrorCode::invalid_argument, "--concurrency values must be in [1, 4096]");
        }
    }
    if (options.preset != "tiny" && options.preset != "small" && options.preset != "real") {
        return fail(ErrorCode::invalid_argument,
                    "--preset must be tiny, small or real, not '" + options.preset + "'");
    }
    if (options.pipeline != "qwen3_omni" && options.pipeline != "s2_pro") {
        return fail(ErrorCode::invalid_argument,
                    "--pipeline must be qwen3_omni or s2_pro, not '" + options.pipeline + "'");
    }
    if (options.pipeline == "s2_pro" && options.code2wav_only) {
        return fail(ErrorCode::invalid_argument,
                    "--code2wav-only drives Qwen3-Omni's vocoder; S2-Pro's is --vocoder-only");
    }
    if (options.vocoder_only &&
        (options.pipeline != "s2_pro" || options.concurrency != std::vector<int>{1})) {
        return fail(ErrorCode::invalid_argument,
                    "--vocoder-only drives S2-Pro's vocoder (--pipeline s2_pro), one stream at a "
                    "time (--concurrency 1)");
    }
    if (options.vocoder_only) return run_vocoder_only(options);
    if (options.reference_seconds < 0 || options.reference_seconds > 60 ||
        (options.reference_seconds > 0 && options.pipeline != "s2_pro")) {
        return fail(ErrorCode::invalid_argument,
                    "--reference-seconds must be in [0, 60], and only with --pipeline s2_pro");
    }
    if (options.preset == "real" && !options.code2wav_only) {
        return fail(ErrorCode::invalid_argument,
                    "--preset real (dummy weights at the released sizes) needs --code2wav-only "
                    "or --vocoder-only");
    }
    const fs::path work =
        fs::temp_directory_path() / ("omnirt-bench-speech-" + std::to_string(::getpid()));
    fs::create_directories(work);
    struct Cleanup {
        fs::path path;
        ~Cleanup() {
            std::error_code ignored;
            fs::remove_all(path, ignored);
        }
    } cleanup{work};
    return options.code2wav_only ? run_code2wav_only(options, work)
                                 : run_pipeline_mode(options, work);
}

std::string format_speech_table(const SpeechBenchReport& report) {
    const auto& o = report.options;
    std::string out;
    char line[512];
    std::snprintf(line, sizeof line, "speech bench (%s, %s): %s, %s\n",
                  o.code2wav_only  ? "code2wav only"
                  : o.vocoder_only ? "vocoder only"
                                   : "pipeline",
                  o.pipeline.c_str(),
                  o.model_path.empty() ? ("preset " + o.preset).c_str() : o.model_path.c_str(),
                  report.cpu.c_str());
    out += line;
    if (o.code2wav_only) {
        std::snprintf(line, sizeof line,
                      "%.1f s of audio per stream, all frames queued at once, %s, "
                      "max_batch_streams %d\n",
                      o.audio_seconds, o.dtype.c_str(), o.max_batch_streams);
    } else if (o.vocoder_only) {
        std::snprintf(line, sizeof line,
                      "%.1f s of audio per stream, one frame per chunk, all queued at once, %s\n",
                      o.audio_seconds, o.dtype.c_str());
    } else {
        std::snprintf(line, sizeof line, "max_tokens %d, max_frames %d, reference %.1f s\n",
                      o.max_tokens, o.max_frames, o.reference_seconds);
    }
    out += line;
    std::snprintf(line, sizeof line, "%5s %7s %6s %10s %10s %8s %8s %8s %8s %9s %8s\n", "conc.",
                  "streams", "failed", "TTFA p50", "TTFA p99", "RTF p50", "RTF p99", "RTF agg",
                  "RTF cmp", "frames/s", "rows/fw");
    out += line;
    for (const SpeechLevel& level : report.levels) {
        std::snprintf(line, sizeof line,
                      "%5d %7d %6d %8.1fms %8.1fms %8.3f %8.3f %8.3f %8.3f %9.1f %8.2f\n",
                      level.concurrency, level.streams, level.failed, level.ttfa_p50_ms,
                      level.ttfa_p99_ms, level.rtf_p50, level.rtf_p99, level.rtf_aggregate,
                      level.compute_rtf, level.frames_per_second, level.rows_per_forward);
        out += line;
        if (!level.stage_ms.empty()) {
            out += "      compute per request (ms):";
            for (const auto& [stage, ms] : level.stage_ms) {
                std::snprintf(line, sizeof line, " %s %.2f", stage.c_str(), ms);
                out += line;
            }
            out += "\n";
        }
    }
    if (!report.chunk_costs.empty()) {
        double audio_seconds = 0;
        for (const SpeechLevel& level : report.levels) audio_seconds += level.audio_seconds;
        std::snprintf(line, sizeof line,
                      "process CPU %.2f s for %.2f s of audio (CPU RTF %.3f, one core = 1); "
                      "load average %.2f before, %.2f after\n",
                      report.cpu_seconds, audio_seconds,
                      audio_seconds > 0 ? report.cpu_seconds / audio_seconds : 0.0,
                      report.load_before, report.load_after);
        out += line;
        out +=
            "audio chunks of the last stream (ms: the stage's work on the chunk; CPU: the "
            "process's CPU time meanwhile):\n";
        for (const VocoderChunkCost& chunk : report.chunk_costs) {
            const double chunk_ms = 1000.0 * static_cast<double>(chunk.frames) * 2048 / 44100;
            std::snprintf(line, sizeof line,
                          "  chunk %3d: %3lld frames, ends at %6.2f s, %8.1f ms (RTF %.3f), "
                          "CPU %8.1f ms (CPU RTF %.3f)\n",
                          chunk.index, static_cast<long long>(chunk.frames), chunk.audio_end_s,
                          chunk.ms, chunk_ms > 0 ? chunk.ms / chunk_ms : 0.0, chunk.cpu_ms,
                          chunk_ms > 0 ? chunk.cpu_ms / chunk_ms : 0.0);
            out += line;
        }
    }
    return out;
}

std::string speech_report_json(const SpeechBenchReport& report) {
    const auto& o = report.options;
    nlohmann::json levels = nlohmann::json::array();
    for (const SpeechLevel& level : report.levels) {
        levels.push_back({{"concurrency", level.concurrency},
                          {"streams", level.streams},
                          {"failed", level.failed},
                          {"ttfa_p50_ms", level.ttfa_p50_ms},
                          {"ttfa_p99_ms", level.ttfa_p99_ms},
                          {"rtf_p50", level.rtf_p50},
                          {"rtf_p99", level.rtf_p99},
                          {"rtf_aggregate", level.rtf_aggregate},
                          {"compute_rtf", level.compute_rtf},
                          {"frames_per_second", level.frames_per_second},
                          {"audio_seconds", level.audio_seconds},
                          {"rows_per_forward", level.rows_per_forward},
                          {"stage_ms", level.stage_ms}});
    }
    nlohmann::json chunks = nlohmann::json::array();
    for (const VocoderChunkCost& chunk : report.chunk_costs) {
        chunks.push_back({{"index", chunk.index},
                          {"frames", chunk.frames},
                          {"audio_end_s", chunk.audio_end_s},
                          {"ms", chunk.ms},
                          {"cpu_ms", chunk.cpu_ms}});
    }
    nlohmann::json json = {{"mode", o.code2wav_only  ? "code2wav_only"
                                    : o.vocoder_only ? "vocoder_only"
                                                     : "pipeline"},
                           {"pipeline", o.pipeline},
                           {"reference_seconds", o.reference_seconds},
                           {"max_frames", o.max_frames},
                           {"preset", o.preset},
                           {"model_path", o.model_path},
                           {"config", o.config_path},
                           {"requests", o.requests},
                           {"first_chunk_frames", o.first_chunk_frames},
                           {"max_tokens", o.max_tokens},
                           {"audio_seconds", o.audio_seconds},
                           {"max_batch_streams", o.max_batch_streams},
                           {"dtype", o.dtype},
                           {"chunk_frames", o.chunk_frames},
                           {"cpu", report.cpu},
                           {"levels", levels},
                           {"chunks", chunks},
                           {"cpu_seconds", report.cpu_seconds},
                           {"load_before", report.load_before},
                           {"load_after", report.load_after}};
    return json.dump(2) + "\n";
}

}  // namespace omnirt::bench
