#include "config/render.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

namespace omnirt::config {
namespace {

using nlohmann::json;

json to_json(const Value& value) {
    switch (value.kind()) {
        case ValueKind::null:
            return nullptr;
        case ValueKind::boolean:
            return value.as_bool();
        case ValueKind::integer:
            return value.as_int();
        case ValueKind::floating:
            return *value.if_float();
        case ValueKind::string:
            return value.as_string();
        case ValueKind::bytes:
        case ValueKind::tensor:
            return value.debug_string();
        case ValueKind::list: {
            json out = json::array();
            for (const auto& item : value.as_list()) out.push_back(to_json(item));
            return out;
        }
        case ValueKind::map: {
            json out = json::object();
            for (const auto& [key, item] : value.as_map()) out[key] = to_json(item);
            return out;
        }
    }
    return nullptr;
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += items[i];
    }
    return out;
}

std::string gpu_text(const std::vector<int>& gpu) {
    if (gpu.empty()) return "cpu";
    std::string out;
    for (std::size_t i = 0; i < gpu.size(); ++i) out += (i ? "," : "") + std::to_string(gpu[i]);
    return "gpu " + out;
}

std::string render_json(const RuntimePlan& plan) {
    json out;
    out["name"] = plan.name;
    out["model_path"] = plan.model_path;
    out["entry_stage"] = plan.entry_stage;
    out["terminal_stages"] = plan.terminal_stages;
    out["terminal_stages_fn"] = plan.terminal_stages_fn ? json(*plan.terminal_stages_fn) : json();
    out["relay_backend"] = plan.relay_backend;
    out["endpoints"] = {{"scheme", plan.scheme == EndpointScheme::ipc ? "ipc" : "tcp"},
                        {"runtime_dir", plan.runtime_dir},
                        {"coordinator", plan.coordinator_endpoint},
                        {"abort", plan.abort_endpoint}};
    out["nodes"] = plan.node_addresses;
    out["node_names"] = plan.node_names;
    out["remote_relay_backend"] = plan.remote_relay_backend;
    json stages = json::array();
    for (const auto& s : plan.stages) {
        json stage = {{"name", s.name},
                      {"factory", s.factory},
                      {"factory_args", to_json(Value(s.factory_args))},
                      {"process", s.process},
                      {"processes", s.processes},
                      {"gpu", s.gpu},
                      {"tp_size", s.tp_size},
                      {"endpoint", s.endpoint},
                      {"node", s.node},
                      {"relay",
                       {{"backend", s.relay.backend},
                        {"device", s.relay.device},
                        {"slot_size_mb", s.relay.slot_size_mb},
                        {"credits", s.relay.credits},
                        {"rank", s.relay.rank},
                        {"world_size", s.relay.world_size}}},
                      {"next", s.next},
                      {"terminal", s.terminal},
                      {"wait_for", s.wait_for},
                      {"stream_to", s.stream_to},
                      {"stream_sources", s.stream_sources},
                      {"local_targets", s.local_targets},
                      {"local_stream_targets", s.local_stream_targets},
                      {"same_gpu_stream_targets", s.same_gpu_stream_targets},
                      {"fan_in_timeout_s", s.fan_in_timeout_s}};
        for (const auto& [field, fn] :
             {std::pair{"route_fn", &s.route_fn}, std::pair{"wait_for_fn", &s.wait_for_fn},
              std::pair{"merge_fn", &s.merge_fn},
              std::pair{"stream_done_to_fn", &s.stream_done_to_fn}}) {
            if (*fn) stage[field] = **fn;
        }
        if (!s.project_payload.empty()) stage["project_payload"] = s.project_payload;
        if (s.replicas > 1) {
            stage["replicas"] = s.replicas;
            stage["replica_endpoints"] = s.replica_endpoints;
        }
        stages.push_back(std::move(stage));
    }
    out["stages"] = std::move(stages);
    json processes = json::array();
    for (const auto& p : plan.processes) {
        json process = {
            {"name", p.name}, {"stages", p.stages}, {"relay_rank", p.relay_rank}, {"node", p.node}};
        process["gpu"] = p.gpu ? json(*p.gpu) : json();
        if (p.replicas > 1) process["replica"] = {{"index", p.replica}, {"of", p.replicas}};
        if (p.tp) {
            process["tp"] = {{"stage", p.tp->stage},
                             {"rank", p.tp->rank},
                             {"size", p.tp->size},
                             {"rendezvous", p.tp->rendezvous}};
        }
        processes.push_back(std::move(process));
    }
    out["processes"] = std::move(processes);
    json edges = json::array();
    for (const auto& e : plan.edges) {
        edges.push_back({{"from", e.from},
                         {"to", e.to},
                         {"kind", e.kind == EdgeKind::normal ? "normal" : "stream"},
                         {"same_process", e.same_process},
                         {"same_gpu", e.same_gpu},
                         {"tier", e.tier}});
    }
    out["edges"] = std::move(edges);
    out["env_defaults"] = plan.env_defaults;
    out["plugins"] = plan.plugins;
    return out.dump(2) + "\n";
}

std::string render_text(const RuntimePlan& plan) {
    std::ostringstream out;
    out << "pipeline " << plan.name << " (model " << plan.model_path << ")\n";
    out << "  entry: " << plan.entry_stage << "\n";
    out << "  terminal: " << join(plan.terminal_stages);
    if (plan.terminal_stages_fn) out << " (per request: " << *plan.terminal_stages_fn << ")";
    out << "\n  relay backend: " << plan.relay_backend;
    if (!plan.remote_relay_backend.empty()) {
        out << " (between nodes: " << plan.remote_relay_backend << ")";
    }
    out << "\n";
    for (std::size_t rank = 0; rank < plan.node_addresses.size(); ++rank) {
        out << "  node " << rank;
        if (rank < plan.node_names.size()) out << " (" << plan.node_names[rank] << ")";
        out << ": " << plan.node_addresses[rank]
            << (rank == 0 ? " (head: coordinator, HTTP API)" : "") << "\n";
    }
    out << "  runtime dir: " << plan.runtime_dir << "\n";
    out << "  coordinator: " << plan.coordinator_endpoint << " (aborts " << plan.abort_endpoint
        << ")\n\nstages:\n";
    for (const auto& s : plan.stages) {
        out << "  " << s.name << "  [" << s.factory << "]\n";
        out << "    process " << join(s.processes) << ", " << gpu_text(s.gpu);
        if (s.tp_size > 1) out << ", tp " << s.tp_size;
        if (s.replicas > 1) out << ", " << s.replicas << " replicas";
        if (!plan.node_addresses.empty()) {
            // One node per replica, or per TP rank (in process order).
            std::vector<std::string> nodes;
            if (s.tp_size > 1) {
                for (const auto& name : s.processes) {
                    const ProcessPlan* process = plan.find_process(name);
                    nodes.push_back(plan.node_name(process != nullptr ? process->node : s.node));
                }
            } else {
                for (int k = 0; k < std::max(s.replicas, 1); ++k) {
                    nodes.push_back(plan.node_name(replica_node(plan, s, k)));
                }
            }
            const bool spread = std::any_of(nodes.begin(), nodes.end(),
                                            [&](const auto& n) { return n != nodes.front(); });
            const std::string per = s.tp_size > 1 ? ", ranks on nodes " : ", nodes ";
            out << (spread ? per + join(nodes) : ", node " + nodes.front());
        }
        out << "\n    endpoint " << (s.replicas > 1 ? join(s.replica_endpoints) : s.endpoint)
            << "\n";
        out << "    relay " << s.relay.backend << " on " << s.relay.device << ", slot "
            << s.relay.slot_size_mb << " MB x " << s.relay.credits << " credits, rank "
            << s.relay.rank << "/" << s.relay.world_size << "\n";
        if (s.terminal) out << "    -> coordinator (terminal)\n";
        if (!s.next.empty()) {
            out << "    next: " << join(s.next);
            if (s.route_fn) out << " (route_fn " << *s.route_fn << ")";
            out << "\n";
        }
        if (!s.wait_for.empty()) {
            out << "    wait_for: " << join(s.wait_for) << " (merge " << s.merge_fn.value_or("?");
            if (s.wait_for_fn) out << ", wait_for_fn " << *s.wait_for_fn;
            out << ")\n";
        }
        if (!s.stream_to.empty()) out << "    stream_to: " << join(s.stream_to) << "\n";
    }
    out << "\nprocesses:\n";
    for (const auto& p : plan.processes) {
        out << "  " << p.name << ": " << join(p.stages);
        if (!plan.node_addresses.empty()) out << " (node " << plan.node_name(p.node) << ")";
        if (p.gpu) out << " (gpu " << *p.gpu << ")";
        if (p.replicas > 1) out << " (replica " << p.replica << " of " << p.replicas << ")";
        if (p.tp)
            out << " (tp rank " << p.tp->rank << "/" << p.tp->size << ", " << p.tp->rendezvous
                << ")";
        out << "\n";
    }
    out << "\nedges:\n";
    for (const auto& e : plan.edges) {
        out << "  " << e.from << (e.kind == EdgeKind::normal ? " --> " : " ~~> ") << e.to;
        if (e.kind == EdgeKind::stream) out << " (stream)";
        if (e.same_process) out << " [same process]";
        if (e.same_gpu) out << " [same gpu]";
        out << " via " << e.tier << "\n";
    }
    return out.str();
}

// Mermaid ids must be plain identifiers.
std::string mermaid_id(const std::string& name) {
    std::string id;
    for (char c : name) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return id;
}

std::string render_mermaid(const RuntimePlan& plan) {
    std::ostringstream out;
    out << "graph TD\n";
    out << "  coordinator([coordinator])\n";
    for (const auto& p : plan.processes) {
        out << "  subgraph " << mermaid_id("proc_" + p.name) << " [\"process " << p.name;
        if (!plan.node_addresses.empty()) out << " (node " << plan.node_name(p.node) << ")";
        if (p.gpu) out << " (gpu " << *p.gpu << ")";
        out << "\"]\n";
        for (const auto& stage : p.stages) {
            const StagePlan* s = plan.find_stage(stage);
            std::string id = mermaid_id(stage) + (p.tp ? "_tp" + std::to_string(p.tp->rank) : "");
            // Edges are drawn to replica 0; the other replicas stand beside it.
            if (p.replica > 0) id += "_r" + std::to_string(p.replica);
            out << "    " << id << "[\"" << stage;
            if (p.tp) out << " rank " << p.tp->rank;
            if (p.replicas > 1) out << " replica " << p.replica;
            out << "<br/>" << s->factory << "\"]\n";
        }
        out << "  end\n";
    }
    auto id_of = [&](const std::string& stage) {
        const StagePlan* s = plan.find_stage(stage);
        return mermaid_id(stage) + (s && s->tp_size > 1 ? "_tp0" : "");
    };
    out << "  coordinator --> " << id_of(plan.entry_stage) << "\n";
    for (const auto& e : plan.edges) {
        out << "  " << id_of(e.from)
            << (e.kind == EdgeKind::normal ? " -- " + e.tier + " --> "
                                           : " -. stream " + e.tier + " .-> ")
            << id_of(e.to) << "\n";
    }
    for (const auto& terminal : plan.terminal_stages) {
        out << "  " << id_of(terminal) << " ==> coordinator\n";
    }
    return out.str();
}

}  // namespace

Result<PlanFormat> parse_plan_format(const std::string& name) {
    if (name == "text") return PlanFormat::text;
    if (name == "json") return PlanFormat::json;
    if (name == "mermaid") return PlanFormat::mermaid;
    return fail(ErrorCode::invalid_argument,
                "unknown format '" + name + "' (expected text, json or mermaid)");
}

std::string render_plan(const RuntimePlan& plan, PlanFormat format) {
    switch (format) {
        case PlanFormat::text:
            return render_text(plan);
        case PlanFormat::json:
            return render_json(plan);
        case PlanFormat::mermaid:
            return render_mermaid(plan);
    }
    return {};
}

}  // namespace omnirt::config
