#include "cli/relay_commands.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "bench/relay_bench.h"
#include "bench/relay_peer.h"
#include "relay/builtin.h"

namespace omnirt::cli {

// gloo and nccl are not registered here: create_relay loads their libtorch-based plugin on first
// use (relay/c10d_loader.h), so that the commands that do not use them do not load libtorch.
void register_relay_backends() {
    if (auto status = relay::register_builtin_backends(); !status) {
        spdlog::error("relay backends: {}", status.error().message);
    }
}

void add_relay_peer_command(CLI::App& app, int& exit_code) {
    auto options = std::make_shared<relay::RelayOptions>();
    auto device = std::make_shared<std::string>("cpu");
    CLI::App* peer = app.add_subcommand("relay-peer", "");  // internal: no help entry
    peer->group("");
    peer->add_option("--backend", options->backend)->required();
    peer->add_option("--name", options->name)->required();
    peer->add_option("--runtime-dir", options->runtime_dir)->required();
    peer->add_option("--device", *device);
    peer->add_option("--slot-bytes", options->slot_bytes);
    peer->add_option("--credits", options->credits);
    peer->add_option("--rank", options->rank);
    peer->add_option("--world-size", options->world_size);
    peer->add_option("--rendezvous", options->rendezvous);
    peer->add_flag("--zero-copy", options->zero_copy);
    peer->callback([options, device, &exit_code] {
        // Logs go to stderr: fds 3 and 4 carry the protocol, stdout stays free.
        spdlog::set_default_logger(spdlog::stderr_color_mt("relay-peer"));
        auto parsed = parse_device(*device);
        if (!parsed) {
            std::cerr << parsed.error().message << "\n";
            exit_code = 2;
            return;
        }
        options->device = *parsed;
        register_relay_backends();
        exit_code = bench::run_relay_peer(*options, 3, 4);
    });
}

void add_bench_relay_command(CLI::App& bench, int& exit_code) {
    struct Args {
        bench::RelayBenchOptions options;
        std::string sizes = "4K,64K,1M,4M,64M,256M";
        std::string json;
        double slot_mb = 64;
    };
    auto args = std::make_shared<Args>();
    CLI::App* relay = bench.add_subcommand(
        "relay", "Relay transfer latency and bandwidth between two processes, next to memcpy");
    relay->add_option("--backend", args->options.backend, "shm, ucx or gloo")
        ->capture_default_str();
    relay->add_option("--sizes", args->sizes, "Comma-separated sizes (K, M, G suffixes)")
        ->capture_default_str();
    relay->add_flag("--zero-copy", args->options.zero_copy,
                    "Receive as read-only views of the sender's memory (shm)");
    relay->add_option("--iterations", args->options.iterations,
                      "Transfers per size (default: by size)");
    relay->add_option("--slot-mb", args->slot_mb, "Relay slot size in MiB")->capture_default_str();
    relay->add_option("--credits", args->options.credits, "Relay credits")->capture_default_str();
    relay->add_option("--json", args->json, "Also write the results as JSON to this file");
    relay->callback([args, &exit_code] {
        auto sizes = bench::parse_sizes(args->sizes);
        if (!sizes) {
            std::cerr << sizes.error().message << "\n";
            exit_code = 2;
            return;
        }
        args->options.sizes = *sizes;
        args->options.slot_bytes = static_cast<std::size_t>(args->slot_mb * (1 << 20));
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        args->options.omnirt_binary =
            n > 0 ? std::string(self, static_cast<std::size_t>(n)) : "omnirt";
        register_relay_backends();
        auto report = bench::run_relay_bench(args->options);
        if (!report) {
            std::cerr << "bench relay: " << report.error().message << "\n";
            exit_code = 1;
            return;
        }
        std::cout << bench::format_relay_table(*report);
        if (!args->json.empty()) std::ofstream(args->json) << bench::relay_report_json(*report);
        exit_code = 0;
    });
}

}  // namespace omnirt::cli
