#include "bench/pipeline_bench.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "bench/relay_bench.h"
#include "config/load.h"
#include "runner/builtins.h"
#include "runner/pipeline.h"

namespace omnirt::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The closed loop: every completion records its latency and starts the next request, so
// `concurrency` requests stay in flight without a thread per request.
class ClosedLoop {
  public:
    ClosedLoop(runner::Pipeline& pipeline, const PipelineBenchOptions& options, int warmup)
        : pipeline_(pipeline), options_(options), warmup_(warmup) {
        latencies_ms_.reserve(static_cast<std::size_t>(options.requests));
    }

    Status run() {
        int first = std::min(options_.concurrency, options_.requests);
        for (int i = 0; i < first; ++i) OMNI_RETURN_IF_ERROR(launch());
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return finished_ == options_.requests || !error_.message.empty(); });
        if (!error_.message.empty()) return fail(error_);
        return {};
    }

    std::vector<double> latencies() const { return latencies_ms_; }
    int failed() const { return failed_; }
    double measured_seconds() const {
        return std::chrono::duration<double>(last_end_ - measure_start_).count();
    }

  private:
    Status launch() {
        int index = started_.fetch_add(1);
        if (index >= options_.requests) return {};
        std::string id = "bench-" + std::to_string(index);
        auto start = Clock::now();
        if (index == warmup_) {
            std::lock_guard lock(mutex_);
            measure_start_ = start;
        }
        return pipeline_.coordinator().start_request(
            id, OmniRequest{.inputs = Map{{"index", index}}}, {},
            [this, index, start](pipeline::RequestEvent event) {
                if (!event.terminal()) return;
                on_done(index, start, event);
            });
    }

    void on_done(int index, Clock::time_point start, const pipeline::RequestEvent& event) {
        auto end = Clock::now();
        {
            std::lock_guard lock(mutex_);
            if (event.kind != pipeline::RequestEvent::Kind::completed) {
                ++failed_;
                if (failed_ == 1) first_failure_ = event.error;
            }
            if (index >= warmup_) {
                latencies_ms_.push_back(
                    std::chrono::duration<double, std::milli>(end - start).count());
                last_end_ = end;
            }
            ++finished_;
        }
        // Runs on the coordinator's IO thread: start_request only queues the submit.
        if (auto launched = launch(); !launched) {
            std::lock_guard lock(mutex_);
            error_ = launched.error();
        }
        done_.notify_all();
    }

    runner::Pipeline& pipeline_;
    const PipelineBenchOptions& options_;
    const int warmup_;
    std::atomic<int> started_{0};
    std::mutex mutex_;
    std::condition_variable done_;
    int finished_ = 0;
    int failed_ = 0;
    Error first_failure_;
    Error error_{ErrorCode::internal, ""};
    std::vector<double> latencies_ms_;
    Clock::time_point measure_start_ = Clock::now();
    Clock::time_point last_end_ = Clock::now();
};

}  // namespace

std::string pipeline_bench_config(const PipelineBenchOptions& options) {
    std::ostringstream out;
    out << "name: bench-pipeline\nmodel_path: none\nrelay_backend: " << options.relay_backend
        << "\n";
    if (!options.stage_nodes.empty()) {
        out << "endpoints: {scheme: tcp, base_port: " << options.base_port << "}\n";
    }
    out << "stages:\n";
    const std::string inline_arg = options.inline_compute ? "inline_compute: true" : "";
    for (int i = 0; i < options.stages; ++i) {
        out << "  - name: s" << i << "\n";
        out << "    process: "
            << (options.same_process ? std::string("bench") : "p" + std::to_string(i)) << "\n";
        if (i == 0) {
            out << "    factory: test.tensor_producer\n";
            out << "    factory_args: {bytes: " << options.payload_bytes
                << ", dtype: uint8, reuse: true" << (inline_arg.empty() ? "" : ", ") << inline_arg
                << "}\n";
        } else if (i + 1 == options.stages) {
            out << "    factory: test.sink\n";
            if (!inline_arg.empty()) out << "    factory_args: {" << inline_arg << "}\n";
        } else {
            if (options.stage_ms > 0) {
                out << "    factory: test.sleep\n";
                out << "    factory_args: {ms: " << options.stage_ms << ", worker_threads: 1}\n";
            } else {
                out << "    factory: test.identity\n";
                if (!inline_arg.empty()) out << "    factory_args: {" << inline_arg << "}\n";
            }
            if (options.replicas > 1) out << "    replicas: " << options.replicas << "\n";
        }
        if (!options.stage_nodes.empty()) {
            out << "    node: " << options.stage_nodes.at(static_cast<std::size_t>(i)) << "\n";
        }
        if (i + 1 == options.stages) {
            out << "    terminal: true\n";
        } else {
            out << "    next: s" << i + 1 << "\n";
        }
    }
    return out.str();
}

namespace {

Status check_nodes(const PipelineBenchOptions& options, const PipelineBenchNodes* nodes) {
    if (options.stage_nodes.empty()) {
        if (nodes != nullptr) {
            return fail(ErrorCode::invalid_argument, "several nodes need --stage-nodes");
        }
        return ok_status();
    }
    if (nodes == nullptr || nodes->hub == nullptr || nodes->addresses.size() < 2) {
        return fail(ErrorCode::invalid_argument,
                    "--stage-nodes needs --nnodes 2 or more (and the other ranks joined)");
    }
    if (options.stage_nodes.size() != static_cast<std::size_t>(options.stages)) {
        return fail(ErrorCode::invalid_argument,
                    "--stage-nodes has " + std::to_string(options.stage_nodes.size()) +
                        " entries for " + std::to_string(options.stages) +
                        " stages (one node rank per stage)");
    }
    for (int node : options.stage_nodes) {
        if (node < 0 || static_cast<std::size_t>(node) >= nodes->addresses.size()) {
            return fail(ErrorCode::invalid_argument,
                        "--stage-nodes: node " + std::to_string(node) + " is outside 0.." +
                            std::to_string(nodes->addresses.size() - 1) + " (--nnodes)");
        }
    }
    if (options.same_process) {
        return fail(ErrorCode::invalid_argument,
                    "--stage-nodes places stages in separate processes (not --same-process)");
    }
    if (options.base_port < 1 || options.base_port > 65535) {
        return fail(ErrorCode::invalid_argument, "--base-port must be in 1..65535");
    }
    return ok_status();
}

}  // namespace

Result<PipelineBenchReport> run_pipeline_bench(const PipelineBenchOptions& options,
                                               const PipelineBenchNodes* nodes) {
    if (options.stages < 2) return fail(ErrorCode::invalid_argument, "--stages must be at least 2");
    if (options.concurrency < 1 || options.requests < 1) {
        return fail(ErrorCode::invalid_argument, "--concurrency and --requests must be positive");
    }
    if ((options.replicas != 1 || options.stage_ms != 0) && options.stages < 3) {
        return fail(ErrorCode::invalid_argument,
                    "--replicas and --stage-ms apply to the middle stages: --stages must be at "
                    "least 3");
    }
    if (options.replicas != 1 && options.same_process) {
        return fail(ErrorCode::invalid_argument,
                    "--replicas needs the stages in separate processes (not --same-process)");
    }
    if (options.stage_ms < 0) return fail(ErrorCode::invalid_argument, "--stage-ms must be >= 0");
    OMNI_RETURN_IF_ERROR(check_nodes(options, nodes));
    // The bench pipeline is made of test stages: it opts in for itself and its stage processes.
    OMNI_RETURN_IF_ERROR(runner::enable_test_stages());
    OMNI_RETURN_IF_ERROR(runner::register_builtins());
    OMNI_TRY(config::PipelineConfig config,
             config::load_pipeline_text(pipeline_bench_config(options), "<bench pipeline>"));
    runner::PipelineOptions pipeline_options{.placement = runner::Placement::processes,
                                             .binary = options.omnirt_binary};
    if (nodes != nullptr) {
        runner::NodeHub* hub = nodes->hub;
        pipeline_options.node_addresses = nodes->addresses;
        pipeline_options.on_coordinator_started = [hub](auto plan, pipeline::Coordinator& c) {
            return hub->serve_plan(std::move(plan), c);
        };
        pipeline_options.before_stop = [hub] { hub->stop(std::chrono::seconds(10)); };
    }
    OMNI_TRY(auto pipeline, runner::Pipeline::start(config, std::move(pipeline_options)));
    int warmup = options.warmup >= 0 ? options.warmup : std::min(options.requests / 10, 1000);
    warmup = std::min(warmup, options.requests - 1);
    ClosedLoop loop(*pipeline, options, warmup);
    Status ran = loop.run();
    pipeline->stop();
    OMNI_RETURN_IF_ERROR(ran);

    PipelineBenchReport report{.options = options};
    std::vector<double> latencies = loop.latencies();
    report.measured = static_cast<int>(latencies.size());
    report.failed = loop.failed();
    report.p50_ms = percentile(latencies, 50);
    report.p99_ms = percentile(latencies, 99);
    double sum = 0;
    for (double value : latencies) sum += value;
    report.mean_ms = latencies.empty() ? 0 : sum / static_cast<double>(latencies.size());
    report.seconds = loop.measured_seconds();
    report.requests_per_second = report.seconds > 0 ? report.measured / report.seconds : 0;
    return report;
}

std::string format_pipeline_table(const PipelineBenchReport& report) {
    const auto& o = report.options;
    std::string placement;
    if (!o.stage_nodes.empty()) {
        placement = ", stage nodes";
        for (std::size_t i = 0; i < o.stage_nodes.size(); ++i) {
            placement += (i == 0 ? " " : ",") + std::to_string(o.stage_nodes[i]);
        }
    }
    char line[640];
    std::snprintf(line, sizeof line,
                  "pipeline bench: %d stages (%s), payload %zu B, concurrency %d, relay %s, "
                  "middle stages: %s %d ms, %d replica(s)%s\n"
                  "%9s %7s %9s %9s %9s %12s\n%9d %7d %9.3f %9.3f %9.3f %12.0f\n",
                  o.stages, o.same_process ? "one process" : "separate processes", o.payload_bytes,
                  o.concurrency, o.relay_backend.c_str(), o.stage_ms > 0 ? "sleep" : "identity",
                  o.stage_ms, o.replicas, placement.c_str(), "requests", "failed", "p50 ms",
                  "p99 ms", "mean ms", "requests/s", report.measured, report.failed, report.p50_ms,
                  report.p99_ms, report.mean_ms, report.requests_per_second);
    return line;
}

std::string pipeline_report_json(const PipelineBenchReport& report) {
    const auto& o = report.options;
    nlohmann::json json = {{"stages", o.stages},
                           {"payload_bytes", o.payload_bytes},
                           {"concurrency", o.concurrency},
                           {"requests", o.requests},
                           {"same_process", o.same_process},
                           {"relay_backend", o.relay_backend},
                           {"replicas", o.replicas},
                           {"stage_ms", o.stage_ms},
                           {"stage_nodes", o.stage_nodes},
                           {"measured", report.measured},
                           {"failed", report.failed},
                           {"p50_ms", report.p50_ms},
                           {"p99_ms", report.p99_ms},
                           {"mean_ms", report.mean_ms},
                           {"requests_per_second", report.requests_per_second},
                           {"seconds", report.seconds}};
    return json.dump(2) + "\n";
}

}  // namespace omnirt::bench
