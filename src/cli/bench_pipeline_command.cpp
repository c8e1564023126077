#include "cli/bench_pipeline_command.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>

#include "bench/pipeline_bench.h"
#include "cli/serve_nodes.h"

namespace omnirt::cli {

void add_bench_pipeline_command(CLI::App& bench, int& exit_code) {
    auto options = std::make_shared<bench::PipelineBenchOptions>();
    auto json_path = std::make_shared<std::string>();
    CLI::App* command = bench.add_subcommand(
        "pipeline", "Per-request latency and throughput of a chain of stages without compute");
    command->add_option("--stages", options->stages, "Stages in the chain (>= 2, default 3)");
    command->add_option("--payload-bytes", options->payload_bytes,
                        "Bytes of the tensor the first stage produces (default 0)");
    command->add_option("--concurrency", options->concurrency, "Requests in flight (default 1)");
    command->add_option("--requests", options->requests, "Requests to complete (default 1000)");
    command->add_option("--warmup", options->warmup,
                        "Unmeasured first requests (default min(requests/10, 1000))");
    command->add_flag("--same-process", options->same_process,
                      "All stages in one process (same-process dispatch)");
    command->add_flag("--inline-compute", options->inline_compute,
                      "Stages compute on the delivering thread while idle (inline_compute)");
    command->add_option("--relay", options->relay_backend, "Relay backend (default shm)");
    command->add_option("--replicas", options->replicas,
                        "Processes per middle stage (replicas, default 1; needs --stages >= 3)");
    command->add_option("--stage-ms", options->stage_ms,
                        "Middle stages sleep this long per request with one worker (default 0: "
                        "identity)");
    command->add_option("--json", *json_path, "Also write the report as JSON to this file");
    // Several nodes (docs/multi_node.md): this process is node 0; the other ranks run
    // `omnirt serve --nnodes N --node-rank R --dist-init-addr ...`.
    auto nodes = std::make_shared<NodeFlags>();
    command
        ->add_option("--stage-nodes", options->stage_nodes,
                     "Node rank of each stage, comma-separated (one per stage; needs "
                     "--nnodes 2 or more)")
        ->delimiter(',');
    command
        ->add_option("--nnodes", nodes->nnodes,
                     "Nodes the pipeline spans (default 1); this process is node 0")
        ->check(CLI::Range(1, 1024));
    command->add_option("--dist-init-addr", nodes->dist_init_addr,
                        "HOST:PORT where the other ranks join this one (it listens on PORT)");
    command->add_option("--node-addr", nodes->node_addr,
                        "This node's IP address (its stages listen there)");
    command
        ->add_option("--node-join-timeout", nodes->join_timeout_s,
                     "Seconds to wait for the other ranks (default 300)")
        ->check(CLI::PositiveNumber);
    command
        ->add_option("--base-port", options->base_port,
                     "Several nodes: first endpoint port on each node (default 17000)")
        ->check(CLI::Range(1, 65535));
    command->callback([options, json_path, nodes, &exit_code] {
        spdlog::set_level(spdlog::level::warn);
        auto report = [&]() -> Result<bench::PipelineBenchReport> {
            if (!nodes->several()) return bench::run_pipeline_bench(*options);
            OMNI_RETURN_IF_ERROR(check_node_flags(*nodes));
            OMNI_TRY(StartedHub head, start_head(*nodes, {}));
            bench::PipelineBenchNodes placed{.hub = head.hub.get(),
                                             .addresses = head.node_addresses};
            return bench::run_pipeline_bench(*options, &placed);
        }();
        if (!report) {
            std::cerr << "omnirt bench pipeline: " << report.error().to_string() << "\n";
            exit_code = 1;
            return;
        }
        std::cout << bench::format_pipeline_table(*report);
        if (!json_path->empty()) {
            std::ofstream out(*json_path);
            out << bench::pipeline_report_json(*report);
            if (!out) {
                std::cerr << "cannot write " << *json_path << "\n";
                exit_code = 1;
            }
        }
    });
}

}  // namespace omnirt::cli
