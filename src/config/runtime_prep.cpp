#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "config/process_groups.h"
#include "config/runtime_plan.h"

namespace omnirt::config {
namespace {

bool contains(const std::vector<std::string>& list, const std::string& item) {
    return std::find(list.begin(), list.end(), item) != list.end();
}

// Deep merge: maps merge key by key, anything else in `overrides` replaces the base value.
void merge_into(Map& base, const Map& overrides) {
    for (const auto& [key, value] : overrides) {
        auto it = base.find(key);
        if (it != base.end() && it->second.is_map() && value.is_map()) {
            merge_into(it->second.as_map(), value.as_map());
        } else {
            base[key] = value;
        }
    }
}

class EndpointAllocator {
  public:
    // `node_addresses` non-empty: tcp endpoints on each node's address, one port counter per
    // node, all from endpoints.base_port.
    EndpointAllocator(const EndpointsConfig& endpoints, std::string runtime_dir,
                      std::vector<std::string> node_addresses)
        : endpoints_(endpoints),
          runtime_dir_(std::move(runtime_dir)),
          node_addresses_(std::move(node_addresses)) {
        if (node_addresses_.empty()) node_addresses_ = {endpoints.host};
        next_port_.assign(node_addresses_.size(), endpoints.base_port);
    }

    // `name` for ipc socket files; `fallback` when the path would not fit a Unix socket.
    Result<std::string> socket(const std::string& name, const std::string& fallback, int node = 0) {
        if (tcp_scheme()) return tcp(node);
        for (const std::string& candidate : {name, fallback}) {
            std::string path = runtime_dir_ + "/" + candidate + ".sock";
            if (path.size() < sizeof(sockaddr_un{}.sun_path)) return "ipc://" + path;
        }
        return fail(ErrorCode::invalid_argument,
                    "runtime directory '" + runtime_dir_ +
                        "' is too long for Unix socket paths; set endpoints.base_path to a "
                        "shorter directory");
    }

    Result<std::string> rendezvous(const std::string& stage, int node) {
        return store("tp-" + stage, node);
    }

    // A c10d rendezvous: a file store in the runtime directory, or a TCP port of its own.
    Result<std::string> store(const std::string& name, int node = 0) {
        if (tcp_scheme()) return tcp(node);
        return "file://" + runtime_dir_ + "/" + name + ".store";
    }

  private:
    [[nodiscard]] bool tcp_scheme() const {
        return endpoints_.scheme == EndpointScheme::tcp || node_addresses_.size() > 1;
    }

    Result<std::string> tcp(int node) {
        int& next_port = next_port_.at(static_cast<std::size_t>(node));
        if (next_port > 65535) {
            return fail(ErrorCode::out_of_range, "endpoints.base_port " +
                                                     std::to_string(endpoints_.base_port) +
                                                     " leaves too few ports for this pipeline");
        }
        const std::string& host = node_addresses_.at(static_cast<std::size_t>(node));
        // An IPv6 literal goes in brackets in a ZMQ endpoint.
        const bool ipv6 = host.find(':') != std::string::npos;
        return "tcp://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(next_port++);
    }

    const EndpointsConfig& endpoints_;
    std::string runtime_dir_;
    std::vector<std::string> node_addresses_;
    std::vector<int> next_port_;
};

std::string relay_device(const StageConfig& stage, const std::string& backend) {
    if (stage.relay && stage.relay->device) return *stage.relay->device;
    // shm copies through host shared memory, so its buffers stay on the CPU.
    if (backend == "shm" || !stage.on_gpu()) return "cpu";
    return "cuda:" + std::to_string(stage.gpu.front());
}

Map factory_args_for(const PipelineConfig& config, const StageConfig& stage,
                     const Registry& registry) {
    Map args = stage.factory_args;
    if (auto it = config.runtime_overrides.find(stage.name); it != config.runtime_overrides.end()) {
        merge_into(args, it->second);
    }
    auto entry = registry.find(FunctionKind::factory, stage.factory);
    if (entry) {
        const auto& accepts = entry->injectable_args;
        if (contains(accepts, "model_path") && !args.contains("model_path")) {
            args["model_path"] = config.model_path;
        }
        if (contains(accepts, "gpu_id") && !args.contains("gpu_id") && stage.on_gpu()) {
            args["gpu_id"] = stage.gpu.front();
        }
    }
    return args;
}

}  // namespace

const StagePlan* RuntimePlan::find_stage(const std::string& stage_name) const {
    for (const auto& stage : stages) {
        if (stage.name == stage_name) return &stage;
    }
    return nullptr;
}

const ProcessPlan* RuntimePlan::find_process(const std::string& process_name) const {
    for (const auto& process : processes) {
        if (process.name == process_name) return &process;
    }
    return nullptr;
}

std::size_t RuntimePlan::stage_instances() const {
    std::size_t count = 0;
    for (const auto& stage : stages) count += static_cast<std::size_t>(std::max(stage.replicas, 1));
    return count;
}

std::string RuntimePlan::node_name(int rank) const {
    if (rank >= 0 && static_cast<std::size_t>(rank) < node_names.size()) {
        return node_names[static_cast<std::size_t>(rank)];
    }
    return std::to_string(rank);
}

std::string node_label(int rank, const std::string& address,
                       const std::vector<std::string>& names) {
    const auto index = static_cast<std::size_t>(rank);
    if (rank >= 0 && index < names.size()) {
        return "node " + names[index] + " (rank " + std::to_string(rank) +
               (address.empty() ? "" : ", " + address) + ")";
    }
    return "node " + std::to_string(rank) + (address.empty() ? "" : " (" + address + ")");
}

std::string RuntimePlan::node_label(int rank) const {
    const auto index = static_cast<std::size_t>(rank);
    return config::node_label(
        rank, rank >= 0 && index < node_addresses.size() ? node_addresses[index] : std::string(),
        node_names);
}

std::vector<int> RuntimePlan::nodes_of_stage(const StagePlan& stage) const {
    std::vector<int> out;
    for (const auto& name : stage.processes) {
        if (const ProcessPlan* process = find_process(name)) out.push_back(process->node);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

int replica_node(const RuntimePlan& plan, const StagePlan& stage, int replica) {
    if (stage.replicas < 2) return stage.node;
    const ProcessPlan* process =
        plan.find_process(stage.processes.at(static_cast<std::size_t>(replica)));
    return process != nullptr ? process->node : stage.node;
}

std::int64_t replica_relay_rank(const RuntimePlan& plan, const StagePlan& stage, int replica) {
    if (stage.replicas < 2) return stage.relay.rank;
    const ProcessPlan* process =
        plan.find_process(stage.processes.at(static_cast<std::size_t>(replica)));
    return process != nullptr ? process->relay_rank : stage.relay.rank;
}

std::string stage_instance(const std::string& stage, const ProcessPlan& process) {
    return process.replicas > 1 ? replica_name(stage, process.replica) : stage;
}

std::string runtime_base_path(const EndpointsConfig& endpoints) {
    if (endpoints.base_path) return *endpoints.base_path;
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    std::error_code ec;
    if (xdg != nullptr && *xdg != '\0' && std::filesystem::is_directory(xdg, ec)) return xdg;
    return "/tmp";
}

Result<RuntimePlan> prepare_runtime(const PipelineConfig& config, const PrepOptions& options) {
    const Registry& registry = options.registry ? *options.registry : Registry::global();
    RuntimePlan plan;
    plan.name = config.resolved_name();
    plan.model_path = config.model_path;
    plan.relay_backend = config.relay_backend;
    plan.entry_stage = config.resolved_entry_stage();
    plan.terminal_stages = config.terminal_stages();
    plan.terminal_stages_fn = config.terminal_stages_fn;
    plan.scheme = options.node_addresses.size() > 1 ? EndpointScheme::tcp : config.endpoints.scheme;
    plan.runtime_dir = options.runtime_dir.empty()
                           ? runtime_base_path(config.endpoints) + "/omnirt-XXXXXX"
                           : options.runtime_dir;
    plan.env_defaults = config.env_defaults;
    plan.plugins = config.plugins;

    const bool multi_node = options.node_addresses.size() > 1;
    const std::size_t nodes = std::max<std::size_t>(options.node_addresses.size(), 1);
    auto node_count = [](std::size_t count) {
        return std::to_string(count) + (count == 1 ? " node" : " nodes");
    };
    if (config.node_names.size() > nodes) {
        return fail(ErrorCode::invalid_argument,
                    "nodes names " + node_count(config.node_names.size()) +
                        ", but the pipeline runs on " + node_count(nodes) +
                        " (serve it with --nnodes " + std::to_string(config.node_names.size()) +
                        " or more)");
    }
    for (const StageConfig& stage : config.stages) {
        // One process per replica, or per TP rank.
        const int processes = stage.is_tp() ? stage.tp_size : std::max(stage.replicas, 1);
        for (int k = 0; k < processes; ++k) {
            const int node = stage.is_tp() ? stage.node_of_tp_rank(k) : stage.node_of_replica(k);
            if (static_cast<std::size_t>(node) < nodes) continue;
            const std::string which = stage.node_list.empty() ? ""
                                      : stage.is_tp() ? " (TP rank " + std::to_string(k) + ")"
                                                      : " (replica " + std::to_string(k) + ")";
            return fail(ErrorCode::invalid_argument,
                        "stage '" + stage.name + "' is placed on node " + config.node_name(node) +
                            which + ", but the pipeline runs on " + node_count(nodes) +
                            " (serve it with --nnodes " + std::to_string(node + 1) + " or more)");
        }
    }
    if (multi_node) {
        plan.node_addresses = options.node_addresses;
        plan.remote_relay_backend = kRemoteRelayBackend;
    }
    plan.node_names = config.node_names;
    EndpointAllocator endpoints(config.endpoints, plan.runtime_dir, options.node_addresses);
    OMNI_TRY(plan.coordinator_endpoint, endpoints.socket("coordinator", "c"));
    OMNI_TRY(plan.abort_endpoint, endpoints.socket("abort", "a"));

    // Processes, in order of their first stage.
    const auto groups = process_group_of_stages(config);
    auto process_index = [&](const std::string& name) -> ProcessPlan& {
        for (auto& process : plan.processes) {
            if (process.name == name) return process;
        }
        plan.processes.push_back(ProcessPlan{.name = name});
        return plan.processes.back();
    };
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        const StageConfig& stage = config.stages[i];
        StagePlan sp{.name = stage.name,
                     .factory = stage.factory,
                     .factory_args = factory_args_for(config, stage, registry),
                     .gpu = stage.gpu,
                     .tp_size = stage.tp_size,
                     .next = stage.next,
                     .terminal = stage.terminal,
                     .route_fn = stage.route_fn,
                     .wait_for = stage.wait_for,
                     .wait_for_fn = stage.wait_for_fn,
                     .merge_fn = stage.merge_fn,
                     .stream_to = stage.stream_to,
                     .stream_done_to_fn = stage.stream_done_to_fn,
                     .project_payload = stage.project_payload,
                     .fan_in_timeout_s = stage.fan_in_timeout_s,
                     .node = multi_node ? stage.node.value_or(0) : 0};
        const int node = sp.node;
        OMNI_TRY(sp.endpoint,
                 endpoints.socket("stage-" + stage.name, "s" + std::to_string(i), node));
        if (stage.is_tp()) {
            std::vector<std::string> names = tp_process_names(stage);
            // The rendezvous is rank 0's (it hosts the store); `node: [...]` puts rank r on the
            // r-th node, its control endpoint on that node's address.
            OMNI_TRY(std::string rendezvous, endpoints.rendezvous(stage.name, node));
            for (int rank = 0; rank < stage.tp_size; ++rank) {
                ProcessPlan& process = process_index(names[rank]);
                process.node = multi_node ? stage.node_of_tp_rank(rank) : 0;
                process.stages.push_back(stage.name);
                if (stage.on_gpu()) process.gpu = stage.gpu[rank];
                process.tp = TpRank{.stage = stage.name,
                                    .rank = rank,
                                    .size = stage.tp_size,
                                    .rendezvous = rendezvous};
                if (rank > 0) {
                    OMNI_TRY(process.tp->endpoint,
                             endpoints.socket("tp-" + stage.name + "-" + std::to_string(rank),
                                              "t" + std::to_string(i) + "_" + std::to_string(rank),
                                              process.node));
                }
            }
            sp.process = names.front();
            sp.processes = std::move(names);
        } else {
            auto group = groups.find(stage.name);
            const std::string name = group != groups.end() ? group->second : stage.name;
            sp.replicas = stage.replicas;
            for (int k = 0; k < stage.replicas; ++k) {
                ProcessPlan& process =
                    process_index(stage.replicas > 1 ? replica_name(name, k) : name);
                process.node = multi_node ? stage.node_of_replica(k) : 0;
                process.stages.push_back(stage.name);
                if (stage.on_gpu()) process.gpu = stage.gpu.front();
                process.replica = k;
                process.replicas = stage.replicas;
                sp.processes.push_back(process.name);
            }
            sp.process = sp.processes.front();
        }
        plan.stages.push_back(std::move(sp));
    }

    // Replica endpoints after every other stage endpoint, so replicas move no port (each on
    // its replica's node: `node: [...]` spreads a stage's replicas over nodes).
    for (std::size_t i = 0; i < plan.stages.size(); ++i) {
        StagePlan& sp = plan.stages[i];
        if (sp.replicas < 2) continue;
        sp.replica_endpoints.push_back(sp.endpoint);
        for (int k = 1; k < sp.replicas; ++k) {
            OMNI_TRY(std::string endpoint,
                     endpoints.socket("stage-" + replica_name(sp.name, k),
                                      "s" + std::to_string(i) + "r" + std::to_string(k),
                                      replica_node(plan, sp, k)));
            sp.replica_endpoints.push_back(std::move(endpoint));
        }
    }

    // Relay world: one rank per process that does external IO.
    std::int64_t world = 0;
    for (auto& process : plan.processes) {
        if (!process.tp || process.tp->rank == 0) process.relay_rank = world++;
    }
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        const StageConfig& stage = config.stages[i];
        StagePlan& sp = plan.stages[i];
        const RelayConfig relay = stage.relay.value_or(RelayConfig{});
        sp.relay = ResolvedRelay{
            .backend = config.relay_backend,
            .device = relay_device(stage, config.relay_backend),
            .slot_size_mb = relay.slot_size_mb.value_or(kDefaultSlotSizeMb),
            .credits = relay.credits.value_or(kDefaultCredits),
            .rank = relay.rank.value_or(plan.find_process(sp.process)->relay_rank),
            .world_size = relay.world_size.value_or(world),
        };
    }

    // gloo / nccl relays form one c10d process group over the processes that do external IO:
    // one relay per process, so such a process hosts one stage (several would share a rank).
    if (config.relay_backend == "gloo" || config.relay_backend == "nccl") {
        for (const auto& process : plan.processes) {
            if (process.relay_rank >= 0 && process.stages.size() > 1) {
                std::string stages;
                for (const auto& name : process.stages)
                    stages += (stages.empty() ? "" : ", ") + name;
                return fail(ErrorCode::unimplemented,
                            "relay_backend '" + config.relay_backend +
                                "' needs one stage per "
                                "process, but process '" +
                                process.name + "' hosts " + stages +
                                " (use shm or ucx, or give each stage its own process)");
            }
        }
        OMNI_TRY(plan.relay_rendezvous, endpoints.store("relay"));
    }

    // Edges and their fast paths.
    for (StagePlan& from : plan.stages) {
        for (const auto& [targets, kind] : {std::pair{&from.next, EdgeKind::normal},
                                            std::pair{&from.stream_to, EdgeKind::stream}}) {
            for (const std::string& target : *targets) {
                StagePlan* to = nullptr;
                for (auto& candidate : plan.stages) {
                    if (candidate.name == target) to = &candidate;
                }
                if (to == nullptr) continue;  // validation reports unknown targets
                Edge edge{.from = from.name, .to = target, .kind = kind};
                edge.same_process =
                    from.tp_size == 1 && to->tp_size == 1 && from.process == to->process;
                // Replicas may sit on several nodes: the edge is remote, local, or both (per
                // pair of replicas).
                bool same_node_pairs = false;
                bool cross_node_pairs = false;
                for (int a = 0; a < std::max(from.replicas, 1); ++a) {
                    for (int b = 0; b < std::max(to->replicas, 1); ++b) {
                        const bool same = replica_node(plan, from, a) == replica_node(plan, *to, b);
                        (same ? same_node_pairs : cross_node_pairs) = true;
                    }
                }
                const bool same_node = !cross_node_pairs;
                edge.same_gpu = !edge.same_process && same_node && !from.gpu.empty() &&
                                !to->gpu.empty() && from.gpu.front() == to->gpu.front();
                edge.tier = edge.same_process ? "local"
                            : same_node       ? plan.relay_backend
                            : same_node_pairs ? plan.relay_backend + "+" + plan.remote_relay_backend
                                              : plan.remote_relay_backend;
                if (kind == EdgeKind::normal) {
                    if (edge.same_process) from.local_targets.push_back(target);
                } else {
                    to->stream_sources.push_back(from.name);
                    if (edge.same_process) from.local_stream_targets.push_back(target);
                    if (edge.same_gpu) from.same_gpu_stream_targets.push_back(target);
                }
                plan.edges.push_back(std::move(edge));
            }
        }
    }
    return plan;
}

}  // namespace omnirt::config
