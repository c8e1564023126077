#include "bench/generate_bench.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "bench/memory_bandwidth.h"
#include "bench/relay_bench.h"
#include "checkpoint/checkpoint.h"
#include "config/load.h"
#include "models/builtin_families.h"
#include "runner/builtins.h"
#include "runner/pipeline.h"

namespace omnirt::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A private directory (mode 0700) removed with its contents when this goes.
class TemporaryDirectory {
  public:
    static Result<TemporaryDirectory> create() {
        const char* base = std::getenv("TMPDIR");
        std::string pattern =
            (fs::path(base != nullptr && *base != '\0' ? base : "/tmp") / "omnirt-bench-XXXXXX")
                .string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            return fail(ErrorCode::unavailable, "cannot create a directory like " + pattern);
        }
        return TemporaryDirectory(pattern);
    }
    TemporaryDirectory(TemporaryDirectory&& other) noexcept : path_(std::move(other.path_)) {
        other.path_.clear();
    }
    TemporaryDirectory& operator=(TemporaryDirectory&&) = delete;
    ~TemporaryDirectory() {
        std::error_code ignored;
        if (!path_.empty()) fs::remove_all(path_, ignored);
    }
    [[nodiscard]] const fs::path& path() const { return path_; }

  private:
    explicit TemporaryDirectory(fs::path path) : path_(std::move(path)) {}
    fs::path path_;
};

Result<std::string> default_plugin_path(const models::ModelFamily& family) {
    std::error_code error;
    const fs::path executable = fs::read_symlink("/proc/self/exe", error);
    if (error) return fail(ErrorCode::unavailable, "cannot read /proc/self/exe");
    return (executable.parent_path().parent_path() / "lib" / family.serve.plugin_file).string();
}

// Elements one decode step of `batch` sequences reads (models::DecodeFootprint).
double step_elements(const models::DecodeFootprint& footprint, int batch) {
    double total =
        static_cast<double>(footprint.dense_elements + footprint.embedding_row_elements * batch);
    if (footprint.num_experts > 0 && footprint.expert_elements > 0) {
        const double active = std::min<double>(
            static_cast<double>(footprint.num_experts),
            static_cast<double>(batch) * static_cast<double>(footprint.experts_per_token));
        total += static_cast<double>(footprint.expert_elements) * active /
                 static_cast<double>(footprint.num_experts);
    }
    return total;
}

std::string pipeline_text(const GenerateBenchOptions& options, const std::string& factory,
                          const fs::path& model_dir, std::int64_t max_total_tokens, int max_batch,
                          int threads) {
    std::ostringstream out;
    out << "name: bench-generate\n"
        << "model_path: " << nlohmann::json(model_dir.string()).dump() << "\n"
        << "plugins: [" << nlohmann::json(options.plugin).dump() << "]\n"
        << "stages:\n"
        << "  - name: thinker\n"
        << "    process: bench\n"
        << "    factory: " << factory << "\n"
        << "    factory_args: {dtype: " << options.dtype << ", load_format: " << options.load_format
        << ", dummy_seed: " << options.seed << ", max_total_tokens: " << max_total_tokens
        << ", max_running_requests: " << max_batch
        << ", max_prefill_tokens: " << options.max_prefill_tokens
        << ", enable_prefix_cache: false, num_threads: " << threads << "}\n"
        << "    terminal: true\n";
    if (options.gpu >= 0) out << "    gpu: " << options.gpu << "\n";
    return out.str();
}

// One batch in flight: every chunk and end timestamped on the coordinator's IO thread.
class BatchRun {
  public:
    BatchRun(runner::Pipeline& pipeline, int batch) : pipeline_(pipeline), requests_(batch) {}

    Status run(const std::vector<std::vector<std::int32_t>>& prompts, int output_len,
               const std::string& id_prefix) {
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            requests_[i].tokens.reserve(static_cast<std::size_t>(output_len) + 1);
        }
        start_ = Clock::now();
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            OmniRequest request{
                .inputs = Value(Map{{"input_ids", Value(Tensor::from_vector(prompts[i]))}}),
                .params = Value(Map{{"max_tokens", Value(output_len)},
                                    {"sampling", Value(Map{{"temperature", Value(0)},
                                                           {"ignore_eos", Value(true)}})}})};
            Status started = pipeline_.coordinator().start_request(
                id_prefix + std::to_string(i), std::move(request), {},
                [this, i](pipeline::RequestEvent event) { on_event(i, event); });
            if (!started) {
                std::lock_guard lock(mutex_);
                requests_[i].error = started.error();
                requests_[i].ended = true;
                ++ended_;
            }
        }
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return ended_ == requests_.size(); });
        return ok_status();
    }

    struct Request {
        std::vector<Clock::time_point> tokens;
        Clock::time_point end;
        bool ended = false;
        bool completed = false;
        Error error;
    };
    [[nodiscard]] const std::vector<Request>& requests() const { return requests_; }
    [[nodiscard]] Clock::time_point start() const { return start_; }

  private:
    void on_event(std::size_t index, const pipeline::RequestEvent& event) {
        const Clock::time_point now = Clock::now();
        std::lock_guard lock(mutex_);
        Request& request = requests_[index];
        if (!event.terminal()) {
            request.tokens.push_back(now);
            return;
        }
        request.end = now;
        request.ended = true;
        request.completed = event.kind == pipeline::RequestEvent::Kind::completed;
        if (!request.completed) request.error = event.error;
        ++ended_;
        if (ended_ == requests_.size()) done_.notify_all();
    }

    runner::Pipeline& pipeline_;
    std::mutex mutex_;
    std::condition_variable done_;
    std::vector<Request> requests_;
    std::size_t ended_ = 0;
    Clock::time_point start_;
};

double milliseconds(Clock::duration duration) {
    return std::chrono::duration<double, std::milli>(duration).count();
}

GenerateBatchResult measure(const BatchRun& run, int batch, const GenerateBenchOptions& options,
                            const models::DecodeFootprint& footprint, double element_bytes,
                            double bandwidth_gbps) {
    GenerateBatchResult result{.batch = batch};
    std::vector<const BatchRun::Request*> good;
    std::vector<double> ttft;
    Clock::time_point last_end = run.start();
    for (const auto& request : run.requests()) {
        last_end = std::max(last_end, request.end);
        if (!request.completed || request.tokens.size() < 2) {
            ++result.failed;
            continue;
        }
        good.push_back(&request);
        ttft.push_back(milliseconds(request.tokens.front() - run.start()));
    }
    result.seconds = std::chrono::duration<double>(last_end - run.start()).count();
    if (good.empty()) return result;
    result.ttft_p50_ms = percentile(ttft, 50);
    result.ttft_max_ms = *std::max_element(ttft.begin(), ttft.end());

    // The steady window: every request has its first token, none has its last.
    Clock::time_point window_start = good.front()->tokens.front();
    Clock::time_point window_end = good.front()->tokens.back();
    for (const auto* request : good) {
        window_start = std::max(window_start, request->tokens.front());
        window_end = std::min(window_end, request->tokens.back());
    }
    struct Span {
        std::size_t first, last;  // token indices
    };
    std::vector<Span> spans;
    bool steady = window_end > window_start;
    for (const auto* request : good) {
        const auto& tokens = request->tokens;
        const auto first = static_cast<std::size_t>(
            std::lower_bound(tokens.begin(), tokens.end(), window_start) - tokens.begin());
        const auto past = static_cast<std::size_t>(
            std::upper_bound(tokens.begin(), tokens.end(), window_end) - tokens.begin());
        if (past < first + 3) steady = false;
        spans.push_back({first, past > 0 ? past - 1 : 0});
    }
    if (!steady) {
        for (std::size_t i = 0; i < good.size(); ++i) spans[i] = {0, good[i]->tokens.size() - 1};
    }
    std::vector<double> rates;
    double context = 0;
    for (std::size_t i = 0; i < good.size(); ++i) {
        const auto& tokens = good[i]->tokens;
        const double seconds =
            std::chrono::duration<double>(tokens[spans[i].last] - tokens[spans[i].first]).count();
        const auto steps = static_cast<double>(spans[i].last - spans[i].first);
        rates.push_back(seconds > 0 ? steps / seconds : 0);
        // Token k (0-based) is sampled from a step that reads input_len + k positions.
        context +=
            options.input_len + static_cast<double>(spans[i].first + spans[i].last + 1) / 2.0;
    }
    result.steady_window = steady;
    result.mean_context = context / static_cast<double>(good.size());
    result.decode_tps_per_request = percentile(rates, 50);
    for (double rate : rates) result.decode_tps_aggregate += rate;
    result.step_ms = result.decode_tps_aggregate > 0
                         ? 1000.0 * static_cast<double>(good.size()) / result.decode_tps_aggregate
                         : 0;
    result.weight_bytes_per_step = step_elements(footprint, batch) * element_bytes;
    result.kv_bytes_per_step = static_cast<double>(footprint.kv_elements_per_token) *
                               element_bytes * result.mean_context *
                               static_cast<double>(good.size());
    const double bytes_per_ms = bandwidth_gbps * 1e6;
    result.roofline_step_ms = result.weight_bytes_per_step / bytes_per_ms;
    result.roofline_kv_step_ms =
        (result.weight_bytes_per_step + result.kv_bytes_per_step) / bytes_per_ms;
    result.roofline_share = result.step_ms > 0 ? result.roofline_step_ms / result.step_ms : 0;
    return result;
}

std::vector<std::int32_t> random_prompt(std::uint64_t seed, int batch, int index, int length,
                                        std::int64_t vocab) {
    std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                           static_cast<std::uint32_t>(batch), static_cast<std::uint32_t>(index)};
    std::mt19937_64 generator(sequence);
    std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(vocab - 1));
    std::vector<std::int32_t> ids(static_cast<std::size_t>(length));
    for (auto& id : ids) id = token(generator);
    return ids;
}

}  // namespace

Status check_generate_options(GenerateBenchOptions& options) {
    if (options.load_format.empty())
        options.load_format = options.preset.empty() ? "auto" : "dummy";
    if (options.model_path.empty() == options.preset.empty()) {
        return fail(ErrorCode::invalid_argument, "give exactly one of --model-path and --preset");
    }
    if (options.batches.empty()) return fail(ErrorCode::invalid_argument, "--batch is empty");
    for (int batch : options.batches) {
        if (batch < 1) return fail(ErrorCode::invalid_argument, "--batch sizes must be positive");
    }
    if (options.input_len < 1 || options.output_len < 2) {
        return fail(ErrorCode::invalid_argument,
                    "--input-len must be at least 1 and --output-len at least 2");
    }
    if (options.dtype != "float32" && options.dtype != "bfloat16" && options.dtype != "float16") {
        return fail(ErrorCode::invalid_argument,
                    "--dtype must be float32, bfloat16 or float16, not '" + options.dtype + "'");
    }
    if (options.load_format != "auto" && options.load_format != "dummy") {
        return fail(ErrorCode::invalid_argument,
                    "--load-format must be auto or dummy, not '" + options.load_format + "'");
    }
    if (!options.preset.empty() && options.load_format != "dummy") {
        return fail(ErrorCode::invalid_argument,
                    "--preset has no weights: it runs with --load-format dummy");
    }
    if (options.gpu < -1) {
        return fail(ErrorCode::invalid_argument,
                    "--gpu must be a GPU id (>= 0), or -1 for the CPU");
    }
    if (options.threads < 0 || options.max_prefill_tokens < 1) {
        return fail(ErrorCode::invalid_argument,
                    "--threads must not be negative, --max-prefill-tokens must be positive");
    }
    return ok_status();
}

Result<std::vector<int>> parse_batches(const std::string& text) {
    std::vector<int> out;
    std::size_t begin = 0;
    while (begin <= text.size()) {
        const std::size_t end = std::min(text.find(',', begin), text.size());
        int value = 0;
        const char* first = text.data() + begin;
        const char* last = text.data() + end;
        auto [stop, error] = std::from_chars(first, last, value);
        if (first == last || error != std::errc() || stop != last || value < 1) {
            return fail(
                ErrorCode::invalid_argument,
                "--batch: expected positive integers separated by commas, not '" + text + "'");
        }
        out.push_back(value);
        begin = end + 1;
    }
    return out;
}

namespace {

// Without --arch: the default family when it has a generation bench (an AR stage, a decode
// footprint, presets), else the first registered family that has one.
Result<const models::ModelFamily*> default_generation_family(
    const models::FamilyRegistry& families) {
    auto has_bench = [](const models::ModelFamily& family) {
        return !family.ar_stage_factory.empty() && family.decode_footprint && family.preset_config;
    };
    if (auto fallback = families.default_family(); fallback && has_bench(**fallback)) {
        return *fallback;
    }
    for (const models::ModelFamily& family : families.families()) {
        if (has_bench(family)) return &family;
    }
    return fail(ErrorCode::not_found, "no model family has a generation bench");
}

}  // namespace

Result<GenerateBenchReport> run_generate_bench(GenerateBenchOptions options) {
    OMNI_RETURN_IF_ERROR(check_generate_options(options));
    // The model family: --arch (or the default one) for a preset, the checkpoint's otherwise.
    const models::FamilyRegistry& families = models::builtin_families();
    fs::path model_dir = options.model_path;
    nlohmann::json config_json;
    const models::ModelFamily* family = nullptr;
    if (!options.preset.empty()) {
        if (options.arch.empty()) {
            OMNI_TRY(family, default_generation_family(families));
        } else {
            OMNI_TRY(family, families.find(options.arch));
        }
    } else {
        OMNI_TRY(config_json, checkpoint::read_json_file(model_dir / checkpoint::kConfigFile));
        OMNI_TRY(family,
                 families.detect(config_json, (model_dir / checkpoint::kConfigFile).string()));
    }
    if (family->ar_stage_factory.empty() || !family->decode_footprint || !family->preset_config) {
        return fail(ErrorCode::unimplemented,
                    "the model family " + family->name + " has no generation bench");
    }
    if (options.plugin.empty()) {
        OMNI_TRY(options.plugin, default_plugin_path(*family));
    }
    if (!fs::exists(options.plugin)) {
        return fail(ErrorCode::not_found, "the " + family->name + " plugin " + options.plugin +
                                              " does not exist: build it (make build) or pass "
                                              "--plugin");
    }
    options.plugin = fs::absolute(options.plugin).string();

    // The model directory: the checkpoint, or a config.json of the preset.
    std::optional<TemporaryDirectory> preset_dir;
    if (!options.preset.empty()) {
        OMNI_TRY(config_json, family->preset_config(options.preset, options.dtype));
        OMNI_TRY(TemporaryDirectory made, TemporaryDirectory::create());
        preset_dir.emplace(std::move(made));
        model_dir = preset_dir->path();
        std::ofstream out(model_dir / checkpoint::kConfigFile);
        out << config_json.dump(2) << "\n";
        if (!(out.flush())) return fail(ErrorCode::unavailable, "cannot write the preset config");
    }
    auto parsed = family->decode_footprint(config_json);
    if (!parsed) {
        return fail(parsed.error().with_context((model_dir / checkpoint::kConfigFile).string()));
    }
    const models::DecodeFootprint footprint = *std::move(parsed);
    const double element_bytes = options.dtype == "float32" ? 4.0 : 2.0;

    GenerateBenchReport report;
    report.model = footprint.description;
    report.parameters = static_cast<std::uint64_t>(footprint.parameters);
    // The engine's intra-op threads (factory arg num_threads), also those of the bandwidth read.
    report.threads = options.threads > 0 ? options.threads : default_compute_threads();

    const std::size_t bandwidth_bytes =
        options.bandwidth_bytes > 0 ? options.bandwidth_bytes : std::size_t{1} << 30;
    std::cerr << "bench generate: measuring read bandwidth (" << report.threads << " threads)\n";
    OMNI_TRY(
        ReadBandwidth bandwidth,
        measure_read_bandwidth({.bytes = bandwidth_bytes, .threads = report.threads, .passes = 5}));
    report.bandwidth_gbps = bandwidth.best_gbps;
    report.bandwidth_median_gbps = bandwidth.median_gbps;
    report.bandwidth_bytes = bandwidth.bytes;

    const int max_batch = *std::max_element(options.batches.begin(), options.batches.end());
    constexpr std::int64_t kBlock = 16;
    const std::int64_t per_request =
        ((options.input_len + options.output_len) / kBlock + 2) * kBlock;
    // Room for the whole largest batch plus the admission watermark (1 %).
    const std::int64_t max_total_tokens = per_request * max_batch * 102 / 100 + 4 * kBlock;

    OMNI_RETURN_IF_ERROR(runner::register_builtins());
    OMNI_TRY(config::PipelineConfig pipeline_config,
             config::load_pipeline_text(pipeline_text(options, family->ar_stage_factory, model_dir,
                                                      max_total_tokens, max_batch, report.threads),
                                        "<bench generate>"));
    std::cerr << "bench generate: loading " << report.model << " ("
              << (options.load_format == "dummy" ? "dummy weights" : model_dir.string()) << ", "
              << options.dtype << ")\n";
    const Clock::time_point load_start = Clock::now();
    OMNI_TRY(auto pipeline, runner::Pipeline::start(pipeline_config,
                                                    {.placement = runner::Placement::in_process,
                                                     .startup_timeout = std::chrono::minutes(30)}));
    report.load_seconds = std::chrono::duration<double>(Clock::now() - load_start).count();

    // Warm-up (first-touch of the KV cache pages and allocator pools are not measured).
    {
        BatchRun warmup(*pipeline, 1);
        OMNI_RETURN_IF_ERROR(
            warmup.run({random_prompt(options.seed, 0, 0, std::min(options.input_len, 16),
                                      footprint.vocab_size)},
                       2, "warmup-"));
        if (!warmup.requests()[0].completed) {
            pipeline->stop();
            return fail(warmup.requests()[0].error.with_context("bench generate warm-up"));
        }
    }
    for (int batch : options.batches) {
        std::cerr << "bench generate: batch " << batch << "\n";
        std::vector<std::vector<std::int32_t>> prompts;
        for (int i = 0; i < batch; ++i) {
            prompts.push_back(
                random_prompt(options.seed, batch, i, options.input_len, footprint.vocab_size));
        }
        BatchRun run(*pipeline, batch);
        OMNI_RETURN_IF_ERROR(
            run.run(prompts, options.output_len, "b" + std::to_string(batch) + "-"));
        GenerateBatchResult result =
            measure(run, batch, options, footprint, element_bytes, report.bandwidth_gbps);
        OMNI_TRY(ReadBandwidth after,
                 measure_read_bandwidth(
                     {.bytes = bandwidth_bytes, .threads = report.threads, .passes = 2}));
        result.bandwidth_after_gbps = after.best_gbps;
        for (const auto& request : run.requests()) {
            if (!request.completed) {
                std::cerr << "bench generate: a request failed: " << request.error.to_string()
                          << "\n";
                break;
            }
        }
        report.batches.push_back(result);
    }
    pipeline->stop();
    report.options = std::move(options);
    return report;
}

std::string format_generate_table(const GenerateBenchReport& report) {
    const auto& o = report.options;
    std::ostringstream out;
    char line[512];
    std::snprintf(line, sizeof line,
                  "generate bench: %s, %.1fM parameters, %s, %s weights, on %s\n"
                  "input %d tokens, output %d tokens; %d threads; read bandwidth %.1f GB/s (best "
                  "of 5 over %.1f GiB, median %.1f); load %.1f s\n",
                  report.model.c_str(), static_cast<double>(report.parameters) / 1e6,
                  o.dtype.c_str(), o.load_format == "dummy" ? "dummy" : "checkpoint",
                  o.gpu >= 0 ? ("cuda:" + std::to_string(o.gpu)).c_str() : "cpu", o.input_len,
                  o.output_len, report.threads, report.bandwidth_gbps,
                  static_cast<double>(report.bandwidth_bytes) / (1 << 30),
                  report.bandwidth_median_gbps, report.load_seconds);
    out << line;
    std::snprintf(line, sizeof line, "%5s %6s %11s %11s %10s %11s %9s %11s %9s %10s %12s\n",
                  "batch", "failed", "TTFT p50 ms", "TTFT max ms", "tok/s/req", "tok/s total",
                  "step ms", "roofline ms", "+KV ms", "% roofline", "GB/s after");
    out << line;
    for (const auto& row : report.batches) {
        std::snprintf(line, sizeof line,
                      "%5d %6d %11.1f %11.1f %10.2f %11.1f %9.2f %11.2f %9.2f %9.0f%% %12.1f%s\n",
                      row.batch, row.failed, row.ttft_p50_ms, row.ttft_max_ms,
                      row.decode_tps_per_request, row.decode_tps_aggregate, row.step_ms,
                      row.roofline_step_ms, row.roofline_kv_step_ms, row.roofline_share * 100,
                      row.bandwidth_after_gbps, row.steady_window ? "" : " (whole decode)");
        out << line;
    }
    return out.str();
}

std::string generate_report_json(const GenerateBenchReport& report) {
    const auto& o = report.options;
    nlohmann::json batches = nlohmann::json::array();
    for (const auto& row : report.batches) {
        batches.push_back({{"batch", row.batch},
                           {"failed", row.failed},
                           {"ttft_p50_ms", row.ttft_p50_ms},
                           {"ttft_max_ms", row.ttft_max_ms},
                           {"decode_tokens_per_second_per_request", row.decode_tps_per_request},
                           {"decode_tokens_per_second_aggregate", row.decode_tps_aggregate},
                           {"step_ms", row.step_ms},
                           {"steady_window", row.steady_window},
                           {"mean_context", row.mean_context},
                           {"weight_bytes_per_step", row.weight_bytes_per_step},
                           {"kv_bytes_per_step", row.kv_bytes_per_step},
                           {"roofline_step_ms", row.roofline_step_ms},
                           {"roofline_with_kv_step_ms", row.roofline_kv_step_ms},
                           {"roofline_share", row.roofline_share},
                           {"read_bandwidth_after_gbps", row.bandwidth_after_gbps},
                           {"seconds", row.seconds}});
    }
    nlohmann::json json = {{"model", report.model},
                           {"model_path", o.model_path},
                           {"preset", o.preset},
                           {"load_format", o.load_format},
                           {"dtype", o.dtype},
                           {"device", o.gpu >= 0 ? "cuda:" + std::to_string(o.gpu) : "cpu"},
                           {"parameters", report.parameters},
                           {"input_len", o.input_len},
                           {"output_len", o.output_len},
                           {"seed", o.seed},
                           {"max_prefill_tokens", o.max_prefill_tokens},
                           {"threads", report.threads},
                           {"read_bandwidth_gbps", report.bandwidth_gbps},
                           {"read_bandwidth_median_gbps", report.bandwidth_median_gbps},
                           {"read_bandwidth_bytes", report.bandwidth_bytes},
                           {"load_seconds", report.load_seconds},
                           {"batches", batches}};
    return json.dump(2) + "\n";
}

}  // namespace omnirt::bench
