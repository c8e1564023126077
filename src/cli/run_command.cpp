#include "cli/run_command.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "config/value_json.h"
#include "runner/pipeline.h"

namespace omnirt::cli {
namespace {

struct RunOptions {
    std::string config;
    std::vector<std::string> overrides;
    std::string input = "{}";
    std::string params = "{}";
    std::string request_id = "run-1";
    bool stream = false;
    bool in_process = false;
    double timeout_s = 0;
};

// What the request's callback and the signal thread share.
struct Outcome {
    std::mutex mutex;
    std::condition_variable changed;
    bool finished = false;
    int signal = 0;
    pipeline::RequestEvent terminal;
};

void print_chunk(const pipeline::RequestEvent& event) {
    nlohmann::json line = {{"stage", event.from_stage},
                           {"chunk_index", event.chunk_index},
                           {"chunk", config::value_to_json(event.chunk)}};
    if (!event.metadata.is_null()) line["metadata"] = config::value_to_json(event.metadata);
    std::cout << line.dump() << "\n" << std::flush;
}

int run(const RunOptions& options) {
    auto input = config::parse_json_value(options.input);
    if (!input) {
        std::cerr << "--input: " << input.error().message << "\n";
        return 2;
    }
    auto params = config::parse_json_value(options.params);
    if (!params || !params->is_map()) {
        std::cerr << "--params: " << (params ? "expected a JSON object" : params.error().message)
                  << "\n";
        return 2;
    }
    // SIGINT / SIGTERM are taken by a signal thread (every thread started later inherits the
    // mask), which aborts the request and lets the pipeline shut down cleanly.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    runner::PipelineOptions pipeline_options;
    if (options.in_process) pipeline_options.placement = runner::Placement::in_process;
    auto pipeline =
        runner::start_pipeline_file(options.config, options.overrides, pipeline_options);
    if (!pipeline) {
        std::cerr << "omnirt run: " << pipeline.error().to_string() << "\n";
        return 1;
    }
    Outcome outcome;
    std::thread signal_thread([&] {
        int received = 0;
        sigwait(&signals, &received);
        std::lock_guard lock(outcome.mutex);
        if (outcome.finished) return;  // the wake-up at exit, not a user's signal
        outcome.signal = received;
        outcome.changed.notify_all();
    });
    pipeline::RequestOptions request_options;
    if (options.timeout_s > 0) {
        request_options.deadline = std::chrono::system_clock::now() +
                                   std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                       std::chrono::duration<double>(options.timeout_s));
    }
    Status started = (*pipeline)->coordinator().start_request(
        options.request_id, OmniRequest{.inputs = *input, .params = *params}, request_options,
        [&](pipeline::RequestEvent event) {
            if (!event.terminal()) {
                if (options.stream) print_chunk(event);
                return;
            }
            std::lock_guard lock(outcome.mutex);
            outcome.finished = true;
            outcome.terminal = std::move(event);
            outcome.changed.notify_all();
        });
    int code = 0;
    if (!started) {
        std::cerr << "omnirt run: " << started.error().to_string() << "\n";
        code = 1;
    } else {
        std::unique_lock lock(outcome.mutex);
        outcome.changed.wait(lock, [&] { return outcome.finished || outcome.signal != 0; });
        if (!outcome.finished) {
            int received = outcome.signal;
            lock.unlock();
            spdlog::warn("signal {}: aborting request {} and shutting down", received,
                         options.request_id);
            (void)(*pipeline)->abort(options.request_id, "interrupted by signal");
            code = 128 + received;
        } else if (outcome.terminal.kind == pipeline::RequestEvent::Kind::completed) {
            nlohmann::json result = {{"request_id", options.request_id},
                                     {"data", config::value_to_json(outcome.terminal.result.data)}};
            std::cout << result.dump() << "\n";
        } else {
            std::cerr << "omnirt run: request " << options.request_id << " "
                      << (outcome.terminal.kind == pipeline::RequestEvent::Kind::aborted ? "aborted"
                                                                                         : "failed")
                      << ": " << outcome.terminal.error.to_string() << "\n";
            code = 1;
        }
    }
    (*pipeline)->stop();
    // Wake the signal thread (a SIGTERM aimed at it alone) if no signal came.
    bool wake = false;
    {
        std::lock_guard lock(outcome.mutex);
        outcome.finished = true;
        wake = outcome.signal == 0;
    }
    if (wake) pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
    return code;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
    auto options = std::make_shared<RunOptions>();
    CLI::App* command = app.add_subcommand(
        "run", "Start a pipeline, run one request through it, print the result as JSON");
    command->add_option("--config", options->config, "Pipeline config (YAML or JSON)")
        ->required()
        ->check(CLI::ExistingFile);
    command->add_option("--set", options->overrides, "Override a config field: path=value");
    command->add_option("--input", options->input, "Request inputs as JSON (default {})");
    command->add_option("--params", options->params, "Request params as a JSON object");
    command->add_option("--request-id", options->request_id, "Request id (default run-1)");
    command->add_flag("--stream", options->stream, "Print stream chunks as JSON lines");
    command->add_flag("--in-process", options->in_process,
                      "Host every stage in this process instead of child processes");
    command->add_option("--timeout", options->timeout_s, "Request deadline in seconds");
    command->callback([options, &exit_code] { exit_code = run(*options); });
}

}  // namespace omnirt::cli
