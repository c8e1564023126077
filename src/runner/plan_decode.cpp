// Decoding half of the plan codec: Value -> RuntimePlan. The plan file is an external input, so
// every field is checked for presence, kind and range, unknown fields are rejected, and the names
// that refer to stages and processes must resolve. Errors are invalid_argument and name the
// field path: "runtime plan: stages[2].relay.credits: expected int, got string".
#include <cmath>
#include <limits>
#include <set>

#include "runner/plan_codec.h"
#include "runner/plan_format.h"

namespace omnirt::runner {
namespace {

// The fields of one map-valued node. Each getter reads one key; finish() rejects the keys no
// getter asked for.
class Fields {
  public:
    static Result<Fields> of(const Value& value, std::string path) {
        const Map* map = value.if_map();
        if (map == nullptr) {
            return field_error(path, "expected map, got " + std::string(to_string(value.kind())));
        }
        return Fields(map, std::move(path));
    }

    [[nodiscard]] std::string path(std::string_view key) const {
        return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
    }

    Result<const Value*> get(std::string_view key) {
        read_.emplace(key);
        auto found = map_->find(key);
        if (found == map_->end()) return field_error(path(key), "missing");
        return &found->second;
    }

    Result<std::string> string(std::string_view key) {
        OMNI_TRY(const Value* value, get(key));
        return as_string(*value, path(key));
    }

    Result<std::optional<std::string>> optional_string(std::string_view key) {
        OMNI_TRY(const Value* value, get(key));
        if (value->is_null()) return std::optional<std::string>();
        OMNI_TRY(auto text, as_string(*value, path(key)));
        return std::optional<std::string>(std::move(text));
    }

    Result<bool> boolean(std::string_view key) {
        OMNI_TRY(const Value* value, get(key));
        if (const bool* b = value->if_bool()) return *b;
        return expected_kind(*value, path(key), "bool");
    }

    Result<std::int64_t> integer(std::string_view key, std::int64_t min,
                                 std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
        OMNI_TRY(const Value* value, get(key));
        return as_integer(*value, path(key), min, max);
    }

    Result<int> small_integer(std::string_view key, std::int64_t min) {
        OMNI_TRY(auto v, integer(key, min, std::numeric_limits<int>::max()));
        return static_cast<int>(v);
    }

    // A finite number at least `min` (or above it when `exclusive`); ints are accepted.
    Result<double> number(std::string_view key, double min, bool exclusive) {
        OMNI_TRY(const Value* value, get(key));
        if (!value->is_number()) return expected_kind(*value, path(key), "number");
        double v = value->as_number();
        if (!std::isfinite(v) || v < min || (exclusive && v == min)) {
            return field_error(path(key),
                               std::string(exclusive ? "must be above " : "must be at least ") +
                                   std::to_string(min) + ", got " + value->debug_string());
        }
        return v;
    }

    Result<std::vector<std::string>> string_list(std::string_view key) {
        OMNI_TRY(const List* list, list_of(key));
        std::vector<std::string> out;
        out.reserve(list->size());
        for (std::size_t i = 0; i < list->size(); ++i) {
            OMNI_TRY(auto text, as_string((*list)[i], indexed(path(key), i)));
            out.push_back(std::move(text));
        }
        return out;
    }

    Result<std::vector<int>> int_list(std::string_view key, std::int64_t min) {
        OMNI_TRY(const List* list, list_of(key));
        std::vector<int> out;
        out.reserve(list->size());
        for (std::size_t i = 0; i < list->size(); ++i) {
            OMNI_TRY(auto v, as_integer((*list)[i], indexed(path(key), i), min,
                                        std::numeric_limits<int>::max()));
            out.push_back(static_cast<int>(v));
        }
        return out;
    }

    Result<const List*> list_of(std::string_view key) {
        OMNI_TRY(const Value* value, get(key));
        if (const List* list = value->if_list()) return list;
        return expected_kind(*value, path(key), "list");
    }

    Result<Map> any_map(std::string_view key) {
        OMNI_TRY(const Value* value, get(key));
        if (const Map* map = value->if_map()) return *map;
        return expected_kind(*value, path(key), "map");
    }

    Result<std::map<std::string, std::string>> string_map(std::string_view key) {
        OMNI_TRY(const Value* value, get(key));
        const Map* map = value->if_map();
        if (map == nullptr) return expected_kind(*value, path(key), "map");
        std::map<std::string, std::string> out;
        for (const auto& [name, entry] : *map) {
            OMNI_TRY(auto text, as_string(entry, path(key) + "." + name));
            out.emplace(name, std::move(text));
        }
        return out;
    }

    Status finish() const {
        for (const auto& [key, value] : *map_) {
            if (!read_.contains(key)) {
                return field_error(path_, "unknown field " + quoted(key));
            }
        }
        return ok_status();
    }

  private:
    Fields(const Map* map, std::string path) : map_(map), path_(std::move(path)) {}

    static unexpected<Error> expected_kind(const Value& value, const std::string& path,
                                           std::string_view wanted) {
        return field_error(path, "expected " + std::string(wanted) + ", got " +
                                     std::string(to_string(value.kind())));
    }

    static Result<std::string> as_string(const Value& value, const std::string& path) {
        if (const std::string* text = value.if_string()) return *text;
        return expected_kind(value, path, "string");
    }

    static Result<std::int64_t> as_integer(const Value& value, const std::string& path,
                                           std::int64_t min, std::int64_t max) {
        const std::int64_t* v = value.if_int();
        if (v == nullptr) return expected_kind(value, path, "int");
        if (*v < min || *v > max) {
            return field_error(path, "must be in [" + std::to_string(min) + ", " +
                                         std::to_string(max) + "], got " + std::to_string(*v));
        }
        return *v;
    }

    const Map* map_;
    std::string path_;
    std::set<std::string, std::less<>> read_;
};

Result<config::ResolvedRelay> relay_from_value(const Value& value, const std::string& path) {
    OMNI_TRY(Fields f, Fields::of(value, path));
    config::ResolvedRelay relay;
    OMNI_TRY(relay.backend, f.string("backend"));
    OMNI_TRY(relay.device, f.string("device"));
    OMNI_TRY(relay.slot_size_mb, f.number("slot_size_mb", 0.0, true));
    OMNI_TRY(relay.credits, f.integer("credits", 1));
    OMNI_TRY(relay.rank, f.integer("rank", 0));
    OMNI_TRY(relay.world_size, f.integer("world_size", 1));
    OMNI_RETURN_IF_ERROR(f.finish());
    return relay;
}

Result<config::StagePlan> stage_from_value(const Value& value, const std::string& path) {
    OMNI_TRY(Fields f, Fields::of(value, path));
    config::StagePlan s;
    OMNI_TRY(s.name, f.string("name"));
    OMNI_TRY(s.factory, f.string("factory"));
    OMNI_TRY(s.factory_args, f.any_map("factory_args"));
    OMNI_TRY(s.process, f.string("process"));
    OMNI_TRY(s.processes, f.string_list("processes"));
    OMNI_TRY(s.gpu, f.int_list("gpu", 0));
    OMNI_TRY(s.tp_size, f.small_integer("tp_size", 1));
    OMNI_TRY(s.endpoint, f.string("endpoint"));
    OMNI_TRY(s.replicas, f.small_integer("replicas", 1));
    OMNI_TRY(s.replica_endpoints, f.string_list("replica_endpoints"));
    if (s.replicas > config::kMaxReplicas) {
        return field_error(f.path("replicas"), "must be at most " +
                                                   std::to_string(config::kMaxReplicas) + ", got " +
                                                   std::to_string(s.replicas));
    }
    if (s.replica_endpoints.size() != (s.replicas > 1 ? static_cast<std::size_t>(s.replicas) : 0)) {
        return field_error(f.path("replica_endpoints"),
                           "needs one endpoint per replica (" + std::to_string(s.replicas) +
                               "), got " + std::to_string(s.replica_endpoints.size()));
    }
    OMNI_TRY(const Value* relay, f.get("relay"));
    OMNI_TRY(s.relay, relay_from_value(*relay, f.path("relay")));
    OMNI_TRY(s.node, f.small_integer("node", 0));
    OMNI_TRY(s.next, f.string_list("next"));
    OMNI_TRY(s.terminal, f.boolean("terminal"));
    OMNI_TRY(s.route_fn, f.optional_string("route_fn"));
    OMNI_TRY(s.wait_for, f.string_list("wait_for"));
    OMNI_TRY(s.wait_for_fn, f.optional_string("wait_for_fn"));
    OMNI_TRY(s.merge_fn, f.optional_string("merge_fn"));
    OMNI_TRY(s.stream_to, f.string_list("stream_to"));
    OMNI_TRY(s.stream_done_to_fn, f.optional_string("stream_done_to_fn"));
    OMNI_TRY(s.project_payload, f.string_map("project_payload"));
    OMNI_TRY(s.fan_in_timeout_s, f.number("fan_in_timeout_s", 0.0, false));
    OMNI_TRY(s.local_targets, f.string_list("local_targets"));
    OMNI_TRY(s.local_stream_targets, f.string_list("local_stream_targets"));
    OMNI_TRY(s.same_gpu_stream_targets, f.string_list("same_gpu_stream_targets"));
    OMNI_TRY(s.stream_sources, f.string_list("stream_sources"));
    OMNI_RETURN_IF_ERROR(f.finish());
    return s;
}

Result<config::TpRank> tp_from_value(const Value& value, const std::string& path) {
    OMNI_TRY(Fields f, Fields::of(value, path));
    config::TpRank tp;
    OMNI_TRY(tp.stage, f.string("stage"));
    OMNI_TRY(tp.size, f.small_integer("size", 1));
    OMNI_TRY(tp.rank, f.small_integer("rank", 0));
    if (tp.rank >= tp.size) {
        return field_error(f.path("rank"), "must be below size " + std::to_string(tp.size) +
                                               ", got " + std::to_string(tp.rank));
    }
    OMNI_TRY(tp.rendezvous, f.string("rendezvous"));
    OMNI_TRY(tp.endpoint, f.string("endpoint"));
    if (tp.rank > 0 && tp.endpoint.empty()) {
        return field_error(f.path("endpoint"), "a follower rank needs its control endpoint");
    }
    OMNI_RETURN_IF_ERROR(f.finish());
    return tp;
}

Result<config::ProcessPlan> process_from_value(const Value& value, const std::string& path) {
    OMNI_TRY(Fields f, Fields::of(value, path));
    config::ProcessPlan p;
    OMNI_TRY(p.name, f.string("name"));
    OMNI_TRY(p.stages, f.string_list("stages"));
    OMNI_TRY(const Value* gpu, f.get("gpu"));
    if (!gpu->is_null()) {
        OMNI_TRY(p.gpu, f.small_integer("gpu", 0));
    }
    OMNI_TRY(const Value* tp, f.get("tp"));
    if (!tp->is_null()) {
        OMNI_TRY(p.tp, tp_from_value(*tp, f.path("tp")));
    }
    OMNI_TRY(p.relay_rank, f.integer("relay_rank", -1));
    OMNI_TRY(p.replicas, f.small_integer("replicas", 1));
    OMNI_TRY(p.replica, f.small_integer("replica", 0));
    if (p.replicas > config::kMaxReplicas || p.replica >= p.replicas) {
        return field_error(f.path("replica"), "replica " + std::to_string(p.replica) + " of " +
                                                  std::to_string(p.replicas) + " is out of range");
    }
    OMNI_TRY(p.node, f.small_integer("node", 0));
    OMNI_RETURN_IF_ERROR(f.finish());
    return p;
}

Result<config::Edge> edge_from_value(const Value& value, const std::string& path) {
    OMNI_TRY(Fields f, Fields::of(value, path));
    config::Edge e;
    OMNI_TRY(e.from, f.string("from"));
    OMNI_TRY(e.to, f.string("to"));
    OMNI_TRY(auto kind, f.string("kind"));
    if (kind == edge_kind_name(config::EdgeKind::normal)) {
        e.kind = config::EdgeKind::normal;
    } else if (kind == edge_kind_name(config::EdgeKind::stream)) {
        e.kind = config::EdgeKind::stream;
    } else {
        return field_error(f.path("kind"),
                           "unknown edge kind " + quoted(kind) + " (expected normal or stream)");
    }
    OMNI_TRY(e.same_process, f.boolean("same_process"));
    OMNI_TRY(e.same_gpu, f.boolean("same_gpu"));
    OMNI_TRY(e.tier, f.string("tier"));
    OMNI_RETURN_IF_ERROR(f.finish());
    return e;
}

template <class T, class Convert>
Result<std::vector<T>> list_from_value(Fields& f, std::string_view key, Convert convert) {
    OMNI_TRY(const List* list, f.list_of(key));
    std::vector<T> out;
    out.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
        OMNI_TRY(auto item, convert((*list)[i], indexed(f.path(key), i)));
        out.push_back(std::move(item));
    }
    return out;
}

}  // namespace

Result<config::RuntimePlan> plan_from_value(const Value& value) {
    OMNI_TRY(Fields f, Fields::of(value, ""));
    OMNI_TRY(auto version, f.integer("format_version", std::numeric_limits<std::int64_t>::min()));
    if (version != kPlanFormatVersion) {
        return field_error("format_version", "this omnirt reads version " +
                                                 std::to_string(kPlanFormatVersion) + ", got " +
                                                 std::to_string(version));
    }
    config::RuntimePlan plan;
    OMNI_TRY(plan.name, f.string("name"));
    OMNI_TRY(plan.model_path, f.string("model_path"));
    OMNI_TRY(plan.relay_backend, f.string("relay_backend"));
    OMNI_TRY(plan.entry_stage, f.string("entry_stage"));
    OMNI_TRY(plan.terminal_stages, f.string_list("terminal_stages"));
    OMNI_TRY(plan.terminal_stages_fn, f.optional_string("terminal_stages_fn"));
    OMNI_TRY(auto scheme, f.string("scheme"));
    if (scheme == scheme_name(config::EndpointScheme::ipc)) {
        plan.scheme = config::EndpointScheme::ipc;
    } else if (scheme == scheme_name(config::EndpointScheme::tcp)) {
        plan.scheme = config::EndpointScheme::tcp;
    } else {
        return field_error("scheme",
                           "unknown endpoint scheme " + quoted(scheme) + " (expected ipc or tcp)");
    }
    OMNI_TRY(plan.runtime_dir, f.string("runtime_dir"));
    OMNI_TRY(plan.coordinator_endpoint, f.string("coordinator_endpoint"));
    OMNI_TRY(plan.abort_endpoint, f.string("abort_endpoint"));
    OMNI_TRY(plan.relay_rendezvous, f.string("relay_rendezvous"));
    OMNI_TRY(plan.node_addresses, f.string_list("node_addresses"));
    OMNI_TRY(plan.node_names, f.string_list("node_names"));
    OMNI_TRY(plan.remote_relay_backend, f.string("remote_relay_backend"));
    OMNI_TRY(plan.stages, list_from_value<config::StagePlan>(f, "stages", stage_from_value));
    OMNI_TRY(plan.processes,
             list_from_value<config::ProcessPlan>(f, "processes", process_from_value));
    OMNI_TRY(plan.edges, list_from_value<config::Edge>(f, "edges", edge_from_value));
    OMNI_TRY(plan.env_defaults, f.string_map("env_defaults"));
    OMNI_TRY(plan.plugins, f.string_list("plugins"));
    OMNI_RETURN_IF_ERROR(f.finish());
    OMNI_RETURN_IF_ERROR(check_plan_references(plan));
    return plan;
}

}  // namespace omnirt::runner
