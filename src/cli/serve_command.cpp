#include "cli/serve_command.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/default_config.h"
#include "cli/default_model.h"
#include "cli/serve_nodes.h"
#include "client/client.h"
#include "config/load.h"
#include "models/builtin_families.h"
#include "runner/builtins.h"
#include "runner/pipeline.h"
#include "serve/api/api_server.h"
#include "serve/realtime/silero_voice_activity.h"
#include "text/tokenizer.h"
#include "vad/silero_vad.h"

namespace omnirt::cli {
namespace {

struct ServeOptions {
    std::string config;
    bool demo = false;
    std::string model_path;
    std::string model_name;
    std::string host = "127.0.0.1";
    int port = 8000;
    std::string api_key;
    std::size_t max_concurrency = 0;
    std::size_t max_queue = 0;
    std::string log_level = "info";
    std::vector<std::string> overrides;
    std::string allowed_media_dir;
    std::string voices_dir;
    std::string speech_sse = "openai";
    bool allow_remote_media = false;
    double request_timeout_s = 0;
    double drain_timeout_s = 30;
    int http_threads = 2;
    std::size_t max_body_mb = 64;
    // Flow control of streamed responses (docs/serve.md, "Slow readers").
    std::size_t stream_high_water_kib = 1024;
    std::size_t stream_low_water_kib = 256;
    double stream_stall_timeout_s = 30;
    std::string profile_dir = "/tmp/omnirt-profile";
    std::string vad_model = vad::default_model_path();
    NodeFlags nodes;
};

// A YAML flow-scalar for a path (JSON string syntax is valid YAML).
std::string yaml_string(const std::string& text) { return nlohmann::json(text).dump(); }

Result<config::PipelineConfig> load_config(const ServeOptions& options) {
    OMNI_RETURN_IF_ERROR(runner::register_builtins());
    config::LoadOptions load{.overrides = options.overrides};
    if (!options.config.empty() || options.demo) {
        // --model-path wins over a --set of model_path.
        if (!options.model_path.empty())
            load.overrides.push_back("model_path=" + options.model_path);
        if (options.demo) {
            return config::load_pipeline_text(demo_pipeline_yaml(), "<built-in demo pipeline>",
                                              load);
        }
        return config::load_pipeline_file(options.config, load);
    }
    // The chat pipeline of the model family: that of --model-path's config.json, else the
    // default family on its generated checkpoint; its plugin next to the binary.
    const models::FamilyRegistry& families = models::builtin_families();
    std::string model_path = options.model_path;
    OMNI_TRY(const models::ModelFamily* family, model_path.empty()
                                                    ? families.default_family()
                                                    : families.detect_directory(model_path));
    if (family->serve.pipeline_yaml.empty()) {
        return fail(ErrorCode::not_found, "the model family " + family->name +
                                              " has no built-in chat pipeline: pass --config");
    }
    OMNI_TRY(std::string plugin, family_plugin_path(*family));
    if (model_path.empty()) {
        OMNI_TRY(model_path, default_checkpoint(*family));
    }
    load.overrides.insert(load.overrides.begin(),
                          {"plugins=[" + yaml_string(plugin) + "]", "model_path=" + model_path});
    return config::load_pipeline_text(family->serve.pipeline_yaml,
                                      "<built-in " + family->name + " chat pipeline>", load);
}

// The tokenizer, context length and chat template (that of the checkpoint's model family) of the
// pipeline's checkpoint, for /tokenize and /detokenize; none when model_path holds no
// tokenizer.json (e.g. the demo).
void load_model_files(const config::PipelineConfig& config, serve::api::ApiServerOptions& options) {
    const std::filesystem::path directory(config.model_path);
    std::error_code ec;
    if (config.model_path.empty() || !std::filesystem::exists(directory / "tokenizer.json", ec)) {
        return;
    }
    auto tokenizer = text::Tokenizer::from_file((directory / "tokenizer.json").string());
    if (!tokenizer) {
        spdlog::warn("/tokenize and /detokenize are off: {}", tokenizer.error().to_string());
        return;
    }
    options.tokenizer = std::move(*tokenizer);
    std::ifstream file(directory / "config.json");
    auto json = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
    if (auto family = models::builtin_families().detect_directory(directory); family) {
        options.render_chat = (*family)->render_chat;
        // A family's speech stages make audio at speed 1: the server applies `speed`.
        options.time_stretch_speech = true;
        if ((*family)->voices && json.is_object()) options.voices = (*family)->voices(json);
    } else {
        spdlog::info("/tokenize takes prompts only (no chat template): {}", family.error().message);
    }
    if (auto it = json.find("max_position_embeddings");
        json.is_object() && it != json.end() && it->is_number_integer()) {
        options.max_model_len = it->get<std::int64_t>();
    }
}

// The saved voices of --voices-dir (serve/api/saved_voices.h); only for a model family whose
// speech pipeline clones voices from references.
Result<std::shared_ptr<const serve::api::SavedVoices>> load_saved_voices(
    const ServeOptions& options, const config::PipelineConfig& config,
    const serve::openai::RequestLimits& limits) {
    if (options.voices_dir.empty()) return nullptr;
    const models::FamilyRegistry& families = models::builtin_families();
    auto family = families.detect_directory(config.model_path);
    if (!family || !(*family)->clones_voices) {
        std::string cloning;
        for (const models::ModelFamily& known : families.families()) {
            if (known.clones_voices) cloning += (cloning.empty() ? "" : ", ") + known.name;
        }
        return fail(ErrorCode::invalid_argument,
                    "--voices-dir: saved voices are references to clone, and the model at '" +
                        config.model_path + "' " +
                        (family ? "(" + (*family)->name + ") does not clone voices"
                                : "has no known model family") +
                        " (families that do: " + (cloning.empty() ? "none" : cloning) + ")");
    }
    OMNI_TRY(auto voices, serve::api::SavedVoices::load(options.voices_dir, limits));
    spdlog::info("--voices-dir {}: {} saved voice(s)", options.voices_dir, voices->size());
    return voices;
}

int serve(const ServeOptions& options) {
    auto level = spdlog::level::from_str(options.log_level);
    if (level == spdlog::level::off && options.log_level != "off") {
        std::cerr << "--log-level: expected trace, debug, info, warn, error, critical or off\n";
        return 2;
    }
    spdlog::set_level(level);
    if (options.port < 0 || options.port > 65535) {
        std::cerr << "--port: expected 0..65535\n";
        return 2;
    }
    if (options.stream_low_water_kib > options.stream_high_water_kib) {
        std::cerr << "--stream-low-water-kib (" << options.stream_low_water_kib
                  << ") must not exceed --stream-high-water-kib (" << options.stream_high_water_kib
                  << ")\n";
        return 2;
    }
    // SIGINT / SIGTERM are taken with sigwait below; every thread started later inherits the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    if (auto checked = check_node_flags(options.nodes); !checked) {
        std::cerr << "omnirt serve: " << checked.error().message << "\n";
        return 2;
    }
    // A node other than the head takes its plan from the head: no config, no HTTP API.
    if (options.nodes.several() && options.nodes.node_rank > 0) {
        return run_node(options.nodes, options.host, options.port);
    }

    auto config = load_config(options);
    if (!config) {
        std::cerr << "omnirt serve: " << config.error().to_string() << "\n";
        return 1;
    }
    serve::openai::RequestLimits limits;
    limits.max_body_bytes = options.max_body_mb << 20;
    auto saved_voices = load_saved_voices(options, *config, limits);
    if (!saved_voices) {
        std::cerr << "omnirt serve: " << saved_voices.error().to_string() << "\n";
        return 1;
    }
    runner::PipelineOptions pipeline_options;
    std::unique_ptr<runner::NodeHub> hub;  // several nodes: stopped before the pipeline
    if (options.nodes.several()) {
        auto head = start_head(options.nodes, config->restart, config->node_names);
        if (!head) {
            std::cerr << "omnirt serve: " << head.error().to_string() << "\n";
            return 1;
        }
        hub = std::move(head->hub);
        pipeline_options.node_addresses = std::move(head->node_addresses);
        runner::NodeHub* raw_hub = hub.get();
        pipeline_options.on_coordinator_started =
            [raw_hub](std::shared_ptr<const config::RuntimePlan> plan,
                      pipeline::Coordinator& coordinator) {
                return raw_hub->serve_plan(std::move(plan), coordinator);
            };
        // The nodes stop their stages before the coordinator goes (also when start-up fails).
        pipeline_options.before_stop = [raw_hub] {
            raw_hub->stop(std::chrono::milliseconds(10000));
        };
    }
    auto stop_nodes = [&] {
        if (hub) hub->stop(std::chrono::milliseconds(10000));
    };
    auto pipeline = runner::Pipeline::start(*config, pipeline_options);
    if (!pipeline) {
        stop_nodes();
        std::cerr << "omnirt serve: " << pipeline.error().to_string() << "\n";
        return 1;
    }
    if (hub) {
        // The hub stops and starts the head's ranks of TP stages over several nodes.
        runner::Pipeline* raw_pipeline = pipeline->get();
        hub->set_local_control([raw_pipeline](const std::vector<std::string>& processes, bool start,
                                              const std::string& reason) {
            raw_pipeline->control_processes(processes, start, reason);
        });
    }
    client::Client client((*pipeline)->coordinator());
    serve::api::ApiServerOptions server_options{
        .model_name = options.model_name.empty() ? config->resolved_name() : options.model_name,
        .api_key = options.api_key,
        .max_concurrency = options.max_concurrency,
        .max_queue = options.max_queue,
        .request_timeout =
            std::chrono::milliseconds(static_cast<std::int64_t>(options.request_timeout_s * 1000)),
        .profile_dir = options.profile_dir};
    load_model_files(*config, server_options);
    server_options.limits = limits;
    server_options.saved_voices = std::move(*saved_voices);
    server_options.media.allowed_local_dir = options.allowed_media_dir;
    server_options.media.allow_remote = options.allow_remote_media;
    server_options.sglang_speech_sse = options.speech_sse == "sglang";
    server_options.http.host = options.host;
    server_options.http.port = static_cast<std::uint16_t>(options.port);
    server_options.http.threads = options.http_threads;
    server_options.http.stream_high_water_bytes = options.stream_high_water_kib * 1024;
    server_options.http.stream_low_water_bytes = options.stream_low_water_kib * 1024;
    server_options.http.stream_stall_timeout =
        std::chrono::milliseconds(static_cast<std::int64_t>(options.stream_stall_timeout_s * 1000));
    server_options.http.max_stream_buffer_bytes = std::max(
        server_options.http.max_stream_buffer_bytes, server_options.http.stream_high_water_bytes);
    // Server VAD for /v1/realtime: the Silero model file, or manual turns without it.
    if (options.vad_model != "none") {
        auto vad = serve::realtime::silero_voice_activity(options.vad_model);
        if (vad) {
            server_options.vad = std::move(*vad);
        } else {
            spdlog::warn(
                "realtime: no server_vad ({}); sessions commit their audio by hand. "
                "scripts/fetch_vad_model.sh fetches the model.",
                vad.error().to_string());
        }
    }
    auto server = serve::api::ApiServer::create(std::move(server_options), client);
    if (!server) {
        std::cerr << "omnirt serve: " << server.error().to_string() << "\n";
        stop_nodes();
        (*pipeline)->stop();
        return 1;
    }
    if (auto started = (*server)->start(); !started) {
        std::cerr << "omnirt serve: " << started.error().to_string() << "\n";
        stop_nodes();
        (*pipeline)->stop();
        return 1;
    }
    // An IPv6 literal goes in brackets in a URL.
    const bool ipv6 = options.host.find(':') != std::string::npos;
    std::cout << "omnirt serve: listening on http://" << (ipv6 ? "[" : "") << options.host
              << (ipv6 ? "]" : "") << ":" << (*server)->port() << std::endl;
    spdlog::info("serving model '{}' from pipeline '{}' ({} stages)", config->resolved_name(),
                 config->name.value_or("?"), (*pipeline)->plan().stages.size());
    int received = 0;
    sigwait(&signals, &received);
    spdlog::info("signal {}: draining (up to {} s; signal again to stop at once)", received,
                 options.drain_timeout_s);
    // The drain runs on its own thread so that a second signal can cut it short.
    std::atomic<bool> drained{false};
    std::thread drainer([&] {
        if (auto status = (*server)->drain(std::chrono::milliseconds(
                static_cast<std::int64_t>(options.drain_timeout_s * 1000)));
            !status) {
            spdlog::warn("drain: {}", status.error().to_string());
        }
        drained = true;
    });
    const timespec poll_interval{0, 50'000'000};
    while (!drained) {
        if (sigtimedwait(&signals, nullptr, &poll_interval) > 0) {
            spdlog::warn("second signal: stopping without waiting for in-flight responses");
            (*server)->stop();
            break;
        }
    }
    drainer.join();
    // The other nodes stop their stages first (so their supervision does not restart them when
    // the coordinator's shutdown reaches them); the pipeline ends every request still live
    // (their callbacks use the server's state), then the server goes.
    stop_nodes();
    (*pipeline)->stop();
    server->reset();
    return 0;
}

std::string default_family_name() {
    auto family = models::builtin_families().default_family();
    return family ? (*family)->name : "the default model family";
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
    auto options = std::make_shared<ServeOptions>();
    CLI::App* command = app.add_subcommand(
        "serve",
        "Serve a pipeline behind an OpenAI-compatible HTTP API (without --config: the chat "
        "pipeline of the model family of --model-path, else of " +
            default_family_name() + " on its generated checkpoint)");
    auto* config_option =
        command->add_option("--config", options->config, "Pipeline config (YAML or JSON)")
            ->check(CLI::ExistingFile);
    command
        ->add_flag("--demo", options->demo,
                   "Serve the built-in model-free demo pipeline (text and audio; "
                   "docs/demo_pipeline.md)")
        ->excludes(config_option);
    command->add_option("--model-path", options->model_path,
                        "Checkpoint directory (sets the config's model_path; without --config its "
                        "config.json picks the model family; default: the default family's "
                        "generated tiny checkpoint)");
    command->add_option("--model-name", options->model_name,
                        "Model id clients use (default: the config's name, else model_path)");
    command->add_option("--host", options->host, "Address to bind (default 127.0.0.1)");
    command->add_option("--port", options->port, "Port (default 8000; 0: any free port)");
    command
        ->add_option("--api-key", options->api_key,
                     "Require 'Authorization: Bearer KEY' on /v1/* and the profiler (or set "
                     "OMNIRT_API_KEY, which keeps the key out of the process list)")
        ->envname("OMNIRT_API_KEY");
    command->add_option("--max-concurrency", options->max_concurrency,
                        "Generation requests at once; more wait (--max-queue) or get 429 "
                        "(default 0: no limit)");
    command->add_option("--max-queue", options->max_queue,
                        "Requests beyond --max-concurrency that wait for a slot; beyond them 429 "
                        "with Retry-After (default 0: no waiting)");
    command->add_option("--log-level", options->log_level,
                        "trace, debug, info, warn, error, critical, off (default info)");
    command->add_option("--set", options->overrides, "Override a config field: path=value");
    command->add_option("--allowed-media-dir", options->allowed_media_dir,
                        "Directory local media paths (file://) may name (default: none allowed)");
    command->add_option("--voices-dir", options->voices_dir,
                        "Saved reference voices a speech request's `voice` may name (a model "
                        "that clones voices; docs/serve_openai.md has the layout)");
    command
        ->add_option("--speech-sse", options->speech_sse,
                     "Event form of streamed /v1/audio/speech: openai (speech.audio.delta, "
                     "default) or sglang (SGLang-Omni's: a whole file per chunk)")
        ->check(CLI::IsMember({"openai", "sglang"}));
    command->add_flag("--allow-remote-media", options->allow_remote_media,
                      "Pass http(s) media URLs on to the stages (default: 400)");
    command->add_option("--request-timeout", options->request_timeout_s,
                        "Per-request deadline in seconds (default 0: none)");
    command->add_option("--drain-timeout", options->drain_timeout_s,
                        "Seconds SIGTERM waits for in-flight responses (default 30)");
    command->add_option("--http-threads", options->http_threads, "HTTP IO threads (default 2)")
        ->check(CLI::Range(1, 256));
    command
        ->add_option("--max-body-mb", options->max_body_mb,
                     "Largest request body in MiB; larger ones get 413 (default 64)")
        ->check(CLI::Range(1, 4096));
    command
        ->add_option("--stream-high-water-kib", options->stream_high_water_kib,
                     "A stream whose reader is this far behind (KiB unwritten) pauses its request "
                     "in the pipeline (default 1024)")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 22));
    command
        ->add_option("--stream-low-water-kib", options->stream_low_water_kib,
                     "A paused stream resumes its request once this little is unwritten (KiB, at "
                     "most the high-water mark; default 256)")
        ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 22));
    command
        ->add_option("--stream-stall-timeout", options->stream_stall_timeout_s,
                     "Seconds a stream may stay paused (its reader reading nothing) before its "
                     "request is aborted and the connection closed (default 30)")
        ->check(CLI::Range(0.001, 86400.0));
    command->add_option("--vad-model", options->vad_model,
                        "Silero VAD v5 ONNX file for the realtime API's server_vad (default: the "
                        "one the setup caches; \"none\": manual turns only)");
    command->add_option("--profile-dir", options->profile_dir,
                        "Where /start_profile writes traces (default /tmp/omnirt-profile)");
    add_node_flags(*command, options->nodes);
    command->callback([options, &exit_code] { exit_code = serve(*options); });
}

}  // namespace omnirt::cli
