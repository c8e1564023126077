#include "runner/node_protocol.h"

#include <bit>
#include <cmath>
#include <limits>

#include "core/value.h"
#include "proto/value_codec.h"

namespace omnirt::runner::node {
namespace {

// Bounds of what a peer may send: short names, a few hundred processes.
constexpr std::size_t kMaxTextBytes = 4096;
constexpr std::size_t kMaxListItems = 4096;
constexpr int kMaxNodes = 1024;

constexpr proto::DecodeLimits kLimits{
    .max_depth = 8,
    .max_string_bytes = kMaxTextBytes,
    .max_bytes_bytes = kMaxMessageBytes,
    .max_container_elements = kMaxListItems,
    .max_total_elements = std::uint64_t{1} << 16,
    .max_total_bytes = kMaxMessageBytes + 4096,
    .max_tensors = 0,
    .max_tensor_bytes = 0,
};

unexpected<Error> field_error(std::string_view field, const std::string& message) {
    return fail(ErrorCode::invalid_argument,
                "node message: " + std::string(field) + ": " + message);
}

List string_list(const std::vector<std::string>& items) { return List(items.begin(), items.end()); }

// A session id travels as its int64 bit pattern (msgpack integers of a Value are signed).
Value session_value(std::uint64_t session) { return Value(std::bit_cast<std::int64_t>(session)); }

class Fields {
  public:
    explicit Fields(const Map& map) : map_(map) {}

    Result<const Value*> get(std::string_view key) const {
        auto it = map_.find(key);
        if (it == map_.end()) return field_error(key, "missing");
        return &it->second;
    }

    Result<std::string> text(std::string_view key, bool allow_empty = true) const {
        OMNI_TRY(const Value* value, get(key));
        if (!value->is_string()) return field_error(key, "must be a string");
        if (!allow_empty && value->as_string().empty()) return field_error(key, "is empty");
        return value->as_string();
    }

    Result<std::int64_t> integer(
        std::string_view key, std::int64_t min,
        std::int64_t max = std::numeric_limits<std::int64_t>::max()) const {
        OMNI_TRY(const Value* value, get(key));
        if (!value->is_int()) return field_error(key, "must be an integer");
        std::int64_t n = value->as_int();
        if (n < min || n > max) {
            return field_error(key, std::to_string(n) + " is outside " + std::to_string(min) +
                                        ".." + std::to_string(max));
        }
        return n;
    }

    Result<int> rank(std::string_view key) const {
        OMNI_TRY(std::int64_t n, integer(key, 0, kMaxNodes - 1));
        return static_cast<int>(n);
    }

    Result<std::uint64_t> session() const {
        OMNI_TRY(const Value* value, get("session"));
        if (!value->is_int()) return field_error("session", "must be an integer");
        return std::bit_cast<std::uint64_t>(value->as_int());
    }

    Result<bool> boolean(std::string_view key) const {
        OMNI_TRY(const Value* value, get(key));
        if (!value->is_bool()) return field_error(key, "must be a boolean");
        return value->as_bool();
    }

    Result<std::vector<std::string>> names(std::string_view key) const {
        OMNI_TRY(const Value* value, get(key));
        if (!value->is_list()) return field_error(key, "must be a list of strings");
        std::vector<std::string> out;
        for (const Value& item : value->as_list()) {
            if (!item.is_string() || item.as_string().empty()) {
                return field_error(key, "must be a list of non-empty strings");
            }
            out.push_back(item.as_string());
        }
        return out;
    }

  private:
    const Map& map_;
};

Result<NodeMessage> decode_map(const std::string& type, const Fields& f) {
    if (type == "join") {
        Join m;
        OMNI_TRY(m.version, f.integer("version", 0));
        if (m.version != kProtocolVersion) {
            return field_error("version", "this omnirt speaks version " +
                                              std::to_string(kProtocolVersion) + ", the peer " +
                                              std::to_string(m.version) +
                                              " (run the same omnirt on every node)");
        }
        OMNI_TRY(std::int64_t nnodes, f.integer("nnodes", 2, kMaxNodes));
        m.nnodes = static_cast<int>(nnodes);
        OMNI_TRY(m.node_rank, f.rank("node_rank"));
        OMNI_TRY(m.address, f.text("address", /*allow_empty=*/false));
        OMNI_TRY(m.pid, f.integer("pid", 1));
        return m;
    }
    if (type == "welcome") {
        Welcome m;
        OMNI_TRY(m.session, f.session());
        OMNI_TRY(const Value* plan, f.get("plan"));
        if (!plan->is_bytes()) return field_error("plan", "must be bytes");
        m.plan = plan->if_bytes()->data;
        OMNI_TRY(m.restart.max_restarts, f.integer("max_restarts", 0));
        OMNI_TRY(m.restart.backoff_initial_ms, f.integer("backoff_initial_ms", 0));
        OMNI_TRY(m.restart.backoff_max_ms, f.integer("backoff_max_ms", 0));
        OMNI_TRY(const Value* window, f.get("window_s"));
        if (!window->is_number() || !(window->as_number() > 0) ||
            !std::isfinite(window->as_number())) {
            return field_error("window_s", "must be a positive number");
        }
        m.restart.window_s = window->as_number();
        return m;
    }
    if (type == "reject" || type == "rejoin" || type == "shutdown") {
        OMNI_TRY(std::string reason, f.text("reason"));
        if (type == "reject") return Reject{std::move(reason)};
        if (type == "rejoin") return Rejoin{std::move(reason)};
        return Shutdown{std::move(reason)};
    }
    if (type == "heartbeat") {
        Heartbeat m;
        OMNI_TRY(m.session, f.session());
        OMNI_TRY(m.node_rank, f.rank("node_rank"));
        OMNI_TRY(const Value* pids, f.get("pids"));
        if (!pids->is_map()) return field_error("pids", "must be a map of process -> pid");
        for (const auto& [process, pid] : pids->as_map()) {
            if (process.empty() || !pid.is_int() || pid.as_int() < 1) {
                return field_error("pids", "must map process names to pids >= 1");
            }
            m.pids.emplace(process, pid.as_int());
        }
        return m;
    }
    if (type == "hub_heartbeat") {
        HubHeartbeat m;
        OMNI_TRY(m.session, f.session());
        return m;
    }
    if (type == "stages_down") {
        StagesDown m;
        OMNI_TRY(m.session, f.session());
        OMNI_TRY(m.node_rank, f.rank("node_rank"));
        OMNI_TRY(m.stages, f.names("stages"));
        OMNI_TRY(m.reason, f.text("reason"));
        OMNI_TRY(m.restarting, f.boolean("restarting"));
        return m;
    }
    if (type == "stages_restarted") {
        StagesRestarted m;
        OMNI_TRY(m.session, f.session());
        OMNI_TRY(m.node_rank, f.rank("node_rank"));
        OMNI_TRY(m.stages, f.names("stages"));
        OMNI_TRY(m.pid, f.integer("pid", 1));
        return m;
    }
    if (type == "leave") {
        Leave m;
        OMNI_TRY(m.session, f.session());
        OMNI_TRY(m.node_rank, f.rank("node_rank"));
        OMNI_TRY(m.reason, f.text("reason"));
        return m;
    }
    if (type == "process_control") {
        ProcessControl m;
        OMNI_TRY(m.session, f.session());
        OMNI_TRY(m.processes, f.names("processes"));
        if (m.processes.empty()) return field_error("processes", "is empty");
        OMNI_TRY(m.start, f.boolean("start"));
        OMNI_TRY(m.reason, f.text("reason"));
        return m;
    }
    return field_error("type", "unknown message type '" + type.substr(0, 64) + "'");
}

struct ToValue {
    Value operator()(const Join& m) const {
        return Value(Map{{"type", "join"},
                         {"version", m.version},
                         {"nnodes", m.nnodes},
                         {"node_rank", m.node_rank},
                         {"address", m.address},
                         {"pid", m.pid}});
    }
    Value operator()(const Welcome& m) const {
        return Value(Map{{"type", "welcome"},
                         {"session", session_value(m.session)},
                         {"plan", Bytes{m.plan}},
                         {"max_restarts", m.restart.max_restarts},
                         {"window_s", m.restart.window_s},
                         {"backoff_initial_ms", m.restart.backoff_initial_ms},
                         {"backoff_max_ms", m.restart.backoff_max_ms}});
    }
    Value operator()(const Reject& m) const {
        return Value(Map{{"type", "reject"}, {"reason", m.reason}});
    }
    Value operator()(const Heartbeat& m) const {
        Map pids;
        for (const auto& [process, pid] : m.pids) pids.emplace(process, Value(pid));
        return Value(Map{{"type", "heartbeat"},
                         {"session", session_value(m.session)},
                         {"node_rank", m.node_rank},
                         {"pids", Value(std::move(pids))}});
    }
    Value operator()(const HubHeartbeat& m) const {
        return Value(Map{{"type", "hub_heartbeat"}, {"session", session_value(m.session)}});
    }
    Value operator()(const StagesDown& m) const {
        return Value(Map{{"type", "stages_down"},
                         {"session", session_value(m.session)},
                         {"node_rank", m.node_rank},
                         {"stages", string_list(m.stages)},
                         {"reason", m.reason},
                         {"restarting", m.restarting}});
    }
    Value operator()(const StagesRestarted& m) const {
        return Value(Map{{"type", "stages_restarted"},
                         {"session", session_value(m.session)},
                         {"node_rank", m.node_rank},
                         {"stages", string_list(m.stages)},
                         {"pid", m.pid}});
    }
    Value operator()(const Leave& m) const {
        return Value(Map{{"type", "leave"},
                         {"session", session_value(m.session)},
                         {"node_rank", m.node_rank},
                         {"reason", m.reason}});
    }
    Value operator()(const Rejoin& m) const {
        return Value(Map{{"type", "rejoin"}, {"reason", m.reason}});
    }
    Value operator()(const Shutdown& m) const {
        return Value(Map{{"type", "shutdown"}, {"reason", m.reason}});
    }
    Value operator()(const ProcessControl& m) const {
        return Value(Map{{"type", "process_control"},
                         {"session", session_value(m.session)},
                         {"processes", string_list(m.processes)},
                         {"start", m.start},
                         {"reason", m.reason}});
    }
};

}  // namespace

Result<std::vector<std::uint8_t>> encode_node_message(const NodeMessage& message) {
    return proto::encode_value(std::visit(ToValue{}, message));
}

Result<NodeMessage> decode_node_message(std::span<const std::uint8_t> bytes) {
    if (bytes.size() > kMaxMessageBytes + 4096) {
        return fail(ErrorCode::invalid_argument,
                    "node message: " + std::to_string(bytes.size()) + " bytes is too large");
    }
    auto value = proto::decode_value(bytes, kLimits);
    if (!value) {
        return fail(ErrorCode::invalid_argument,
                    "node message: not a valid encoding: " + value.error().message);
    }
    if (!value->is_map()) return field_error("message", "must be a map");
    Fields fields(value->as_map());
    OMNI_TRY(std::string type, fields.text("type"));
    return decode_map(type, fields);
}

std::string_view message_type(const NodeMessage& message) {
    static constexpr std::string_view kNames[] = {
        "join",          "welcome",     "reject",           "heartbeat",
        "hub_heartbeat", "stages_down", "stages_restarted", "leave",
        "rejoin",        "shutdown",    "process_control"};
    return kNames[message.index()];
}

}  // namespace omnirt::runner::node
