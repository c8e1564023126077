// Encoding half of the plan codec and the plan file: RuntimePlan -> Value -> msgpack -> file.
// The Value layout (one map per struct, every field always present, optionals as nil) is the
// contract plan_decode.cpp checks; kPlanFormatVersion changes when it does.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "proto/value_codec.h"
#include "runner/plan_codec.h"
#include "runner/plan_format.h"

namespace omnirt::runner {
namespace {

Value optional_string(const std::optional<std::string>& value) {
    return value ? Value(*value) : Value();
}

Value string_list(const std::vector<std::string>& values) {
    List list;
    list.reserve(values.size());
    for (const auto& v : values) list.emplace_back(v);
    return Value(std::move(list));
}

Value string_map(const std::map<std::string, std::string>& values) {
    Map map;
    for (const auto& [key, value] : values) map.emplace(key, Value(value));
    return Value(std::move(map));
}

Value int_list(const std::vector<int>& values) {
    List list;
    list.reserve(values.size());
    for (int v : values) list.emplace_back(v);
    return Value(std::move(list));
}

Value relay_to_value(const config::ResolvedRelay& relay) {
    return Value(Map{
        {"backend", relay.backend},
        {"device", relay.device},
        {"slot_size_mb", relay.slot_size_mb},
        {"credits", relay.credits},
        {"rank", relay.rank},
        {"world_size", relay.world_size},
    });
}

Value stage_to_value(const config::StagePlan& stage) {
    return Value(Map{
        {"name", stage.name},
        {"factory", stage.factory},
        {"factory_args", Value(stage.factory_args)},
        {"process", stage.process},
        {"processes", string_list(stage.processes)},
        {"gpu", int_list(stage.gpu)},
        {"tp_size", stage.tp_size},
        {"endpoint", stage.endpoint},
        {"replicas", stage.replicas},
        {"replica_endpoints", string_list(stage.replica_endpoints)},
        {"relay", relay_to_value(stage.relay)},
        {"node", stage.node},
        {"next", string_list(stage.next)},
        {"terminal", stage.terminal},
        {"route_fn", optional_string(stage.route_fn)},
        {"wait_for", string_list(stage.wait_for)},
        {"wait_for_fn", optional_string(stage.wait_for_fn)},
        {"merge_fn", optional_string(stage.merge_fn)},
        {"stream_to", string_list(stage.stream_to)},
        {"stream_done_to_fn", optional_string(stage.stream_done_to_fn)},
        {"project_payload", string_map(stage.project_payload)},
        {"fan_in_timeout_s", stage.fan_in_timeout_s},
        {"local_targets", string_list(stage.local_targets)},
        {"local_stream_targets", string_list(stage.local_stream_targets)},
        {"same_gpu_stream_targets", string_list(stage.same_gpu_stream_targets)},
        {"stream_sources", string_list(stage.stream_sources)},
    });
}

Value process_to_value(const config::ProcessPlan& process) {
    Value tp;
    if (process.tp) {
        tp = Value(Map{
            {"stage", process.tp->stage},
            {"rank", process.tp->rank},
            {"size", process.tp->size},
            {"rendezvous", process.tp->rendezvous},
            {"endpoint", process.tp->endpoint},
        });
    }
    return Value(Map{
        {"name", process.name},
        {"stages", string_list(process.stages)},
        {"gpu", process.gpu ? Value(*process.gpu) : Value()},
        {"tp", std::move(tp)},
        {"relay_rank", process.relay_rank},
        {"replica", process.replica},
        {"replicas", process.replicas},
        {"node", process.node},
    });
}

Value edge_to_value(const config::Edge& edge) {
    return Value(Map{
        {"from", edge.from},
        {"to", edge.to},
        {"kind", std::string(edge_kind_name(edge.kind))},
        {"same_process", edge.same_process},
        {"same_gpu", edge.same_gpu},
        {"tier", edge.tier},
    });
}

std::string errno_text(int error) { return std::strerror(error); }

}  // namespace

Value plan_to_value(const config::RuntimePlan& plan) {
    List stages, processes, edges;
    for (const auto& s : plan.stages) stages.push_back(stage_to_value(s));
    for (const auto& p : plan.processes) processes.push_back(process_to_value(p));
    for (const auto& e : plan.edges) edges.push_back(edge_to_value(e));
    return Value(Map{
        {"format_version", kPlanFormatVersion},
        {"name", plan.name},
        {"model_path", plan.model_path},
        {"relay_backend", plan.relay_backend},
        {"entry_stage", plan.entry_stage},
        {"terminal_stages", string_list(plan.terminal_stages)},
        {"terminal_stages_fn", optional_string(plan.terminal_stages_fn)},
        {"scheme", std::string(scheme_name(plan.scheme))},
        {"runtime_dir", plan.runtime_dir},
        {"coordinator_endpoint", plan.coordinator_endpoint},
        {"abort_endpoint", plan.abort_endpoint},
        {"relay_rendezvous", plan.relay_rendezvous},
        {"node_addresses", string_list(plan.node_addresses)},
        {"node_names", string_list(plan.node_names)},
        {"remote_relay_backend", plan.remote_relay_backend},
        {"stages", Value(std::move(stages))},
        {"processes", Value(std::move(processes))},
        {"edges", Value(std::move(edges))},
        {"env_defaults", string_map(plan.env_defaults)},
        {"plugins", string_list(plan.plugins)},
    });
}

Result<std::vector<std::uint8_t>> encode_plan(const config::RuntimePlan& plan) {
    auto bytes = proto::encode_value(plan_to_value(plan));
    if (!bytes) return fail(bytes.error().with_context("encoding the runtime plan"));
    return bytes;
}

Result<config::RuntimePlan> decode_plan(std::span<const std::uint8_t> bytes) {
    auto value = proto::decode_value(bytes, kPlanDecodeLimits);
    if (!value) {
        return fail(ErrorCode::invalid_argument,
                    "runtime plan: not a valid encoding: " + value.error().to_string());
    }
    return plan_from_value(*value);
}

Status write_plan_file(const config::RuntimePlan& plan, const std::string& path) {
    OMNI_TRY(auto bytes, encode_plan(plan));
    // Written beside the target and renamed over it, so a reader never sees a partial plan.
    std::string temporary = path + ".tmp." + std::to_string(getpid());
    int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int error = errno;
        return fail(ErrorCode::unavailable,
                    "cannot write plan file '" + temporary + "': " + errno_text(error));
    }
    std::size_t written = 0;
    int error = 0;
    if (fchmod(fd, 0600) != 0) error = errno;
    while (error == 0 && written < bytes.size()) {
        ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
        if (n < 0) {
            if (errno == EINTR) continue;
            error = errno;
        } else {
            written += static_cast<std::size_t>(n);
        }
    }
    if (close(fd) != 0 && error == 0) error = errno;
    if (error == 0 && rename(temporary.c_str(), path.c_str()) != 0) error = errno;
    if (error != 0) {
        unlink(temporary.c_str());
        return fail(ErrorCode::unavailable,
                    "cannot write plan file '" + path + "': " + errno_text(error));
    }
    return ok_status();
}

Result<config::RuntimePlan> read_plan_file(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int error = errno;
        return fail(error == ENOENT ? ErrorCode::not_found : ErrorCode::unavailable,
                    "cannot read plan file '" + path + "': " + errno_text(error));
    }
    struct stat info {};
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        close(fd);
        return fail(ErrorCode::invalid_argument, "plan file '" + path + "' is not a regular file");
    }
    if (static_cast<std::uint64_t>(info.st_size) > kPlanDecodeLimits.max_total_bytes) {
        close(fd);
        return fail(ErrorCode::out_of_range, "plan file '" + path + "' is larger than " +
                                                 std::to_string(kPlanDecodeLimits.max_total_bytes) +
                                                 " bytes");
    }
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(info.st_size));
    std::size_t got = 0;
    while (got < bytes.size()) {
        ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
    }
    close(fd);
    bytes.resize(got);
    auto plan = decode_plan(bytes);
    if (!plan) return fail(plan.error().with_context("plan file '" + path + "'"));
    return plan;
}

}  // namespace omnirt::runner
