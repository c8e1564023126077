#include "cli/config_command.h"

#include <algorithm>
#include <iostream>
#include <memory>

#include "config/load.h"
#include "config/render.h"
#include "config/runtime_plan.h"
#include "runner/builtins.h"

namespace omnirt::cli {
namespace {

struct ConfigOptions {
    std::string file;
    std::vector<std::string> overrides;
    std::string format = "text";
    std::vector<std::string> node_addresses;  // several nodes: one per rank
};

// The node addresses a plan is shown for: --node-addr, else, when stages (or `nodes:`) name
// nodes other than 0, placeholders "node0", "node1", ... up to the highest rank named (the real
// ones are exchanged when the nodes join).
std::vector<std::string> node_addresses_for(const ConfigOptions& options,
                                            const config::PipelineConfig& config) {
    if (!options.node_addresses.empty()) return options.node_addresses;
    // Every node `nodes:` names, too.
    int highest = static_cast<int>(config.node_names.size()) - 1;
    for (const auto& stage : config.stages) {
        highest = std::max(highest, stage.node.value_or(0));
        for (int rank : stage.node_list) highest = std::max(highest, rank);
    }
    std::vector<std::string> out;
    if (highest == 0) return out;
    for (int rank = 0; rank <= highest; ++rank) out.push_back("node" + std::to_string(rank));
    return out;
}

void print_diagnostics(const std::vector<config::Diagnostic>& diagnostics) {
    for (const auto& diagnostic : diagnostics) std::cerr << diagnostic.to_string() << "\n";
}

int run_validate(const ConfigOptions& options) {
    // The built-in stages (test.*, demo.*) count as registered, as they are when a pipeline runs.
    if (auto registered = runner::register_builtins(); !registered) {
        std::cerr << "omnirt config validate: " << registered.error().to_string() << "\n";
        return 1;
    }
    config::LoadOptions load{.overrides = options.overrides};
    config::LoadReport report = config::load_pipeline_report(options.file, load);
    if (!report.config || !report.diagnostics.empty()) {
        print_diagnostics(report.diagnostics);
        std::cerr << options.file << ": " << report.diagnostics.size()
                  << (report.diagnostics.size() == 1 ? " error" : " errors") << "\n";
        return 1;
    }
    auto plan = config::prepare_runtime(
        *report.config, {.node_addresses = node_addresses_for(options, *report.config)});
    if (!plan) {
        std::cerr << options.file << ": " << plan.error().message << "\n";
        return 1;
    }
    std::cout << options.file << ": ok (" << plan->stages.size() << " stages, "
              << plan->processes.size() << " processes, " << plan->edges.size() << " edges)\n";
    return 0;
}

int run_show(const ConfigOptions& options) {
    auto format = config::parse_plan_format(options.format);
    if (!format) {
        std::cerr << format.error().message << "\n";
        return 2;
    }
    // Showing a plan does not need the stage implementations: names nobody registered yet are
    // left to `config validate`.
    config::LoadOptions load{.overrides = options.overrides, .check_registry = false};
    config::LoadReport report = config::load_pipeline_report(options.file, load);
    if (!report.config || !report.diagnostics.empty()) {
        print_diagnostics(report.diagnostics);
        return 1;
    }
    auto plan = config::prepare_runtime(
        *report.config, {.node_addresses = node_addresses_for(options, *report.config)});
    if (!plan) {
        std::cerr << options.file << ": " << plan.error().message << "\n";
        return 1;
    }
    std::cout << config::render_plan(*plan, *format);
    return 0;
}

}  // namespace

void add_config_command(CLI::App& app, int& exit_code) {
    auto options = std::make_shared<ConfigOptions>();
    CLI::App* config = app.add_subcommand("config", "Check and inspect pipeline configs");
    config->require_subcommand(1);

    auto add_common = [&](CLI::App* command) {
        command->add_option("file", options->file, "Pipeline config (YAML or JSON)")->required();
        command
            ->add_option("--set", options->overrides,
                         "Override a config value: path=value (YAML scalar typing; stages by "
                         "name, e.g. stages.thinker.factory_args.max_seq_len=4096)")
            ->take_all();
        command->add_option("--node-addr", options->node_addresses,
                            "Several nodes: each node's address, rank 0 first (default: "
                            "placeholders node0, node1, ... when stages set `node:`)");
    };

    CLI::App* validate = config->add_subcommand(
        "validate", "Check a config and list every error (exit 0 when valid, 1 otherwise)");
    add_common(validate);
    validate->callback([options, &exit_code] { exit_code = run_validate(*options); });

    CLI::App* show = config->add_subcommand(
        "show", "Print the resolved plan: stages, processes, endpoints, relays and edges");
    add_common(show);
    show->add_option("--format", options->format, "text, json or mermaid")->capture_default_str();
    show->callback([options, &exit_code] { exit_code = run_show(*options); });
}

}  // namespace omnirt::cli
