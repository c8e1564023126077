// Control message decoding: parse_dom checks the limits and the msgpack syntax, then each
// message reads its fields from the top-level map node by name; only Value-typed fields become
// Value trees.
#include "proto/error_text.h"
#include "proto/field_reader.h"
#include "proto/message_names.h"
#include "proto/messages.h"
#include "proto/payload_header_wire.h"
#include "proto/stage_payload_wire.h"
#include "proto/wire_dom.h"

namespace omnirt::proto {
namespace {

using detail::Dom;
using detail::FieldReader;

Result<ControlMessage> read_submit(const Dom& dom, std::uint32_t map) {
    FieldReader fields(dom, map, detail::kSubmitType);
    SubmitMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    OMNI_TRY(std::uint32_t payload, fields.map("payload"));
    OMNI_TRY(message.payload, detail::read_stage_payload(dom, payload, "submit.payload"));
    OMNI_TRY(message.deadline_unix_ms, fields.optional_integer("deadline_unix_ms"));
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_data_ready(const Dom& dom, std::uint32_t map) {
    FieldReader fields(dom, map, detail::kDataReadyType);
    DataReadyMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    OMNI_TRY(message.from_stage, fields.string("from_stage"));
    OMNI_TRY(message.to_stage, fields.string("to_stage"));
    OMNI_TRY(message.relay_metadata, fields.any("relay_metadata"));
    OMNI_TRY(std::uint32_t header, fields.optional_map("header"));
    if (header != detail::kNoNode) {
        OMNI_TRY(message.header, detail::read_payload_header(dom, header, "data_ready.header"));
    }
    OMNI_TRY(message.chunk_id, fields.optional_integer("chunk_id"));
    OMNI_TRY(message.is_done, fields.boolean("is_done"));
    OMNI_TRY(message.error, fields.optional_string("error"));
    return ControlMessage(std::move(message));
}

// An error code from its name; unknown names (from a newer sender) become `internal` and keep
// the name in the message.
void read_error_code(const std::string& name, Error& error) {
    for (int code = 0; code <= static_cast<int>(ErrorCode::internal); ++code) {
        if (to_string(static_cast<ErrorCode>(code)) == name) {
            error.code = static_cast<ErrorCode>(code);
            return;
        }
    }
    error.code = ErrorCode::internal;
    error.message = "(error code " + detail::quote(name) + ") " + error.message;
}

Result<ControlMessage> read_complete(const Dom& dom, std::uint32_t map) {
    FieldReader fields(dom, map, detail::kCompleteType);
    CompleteMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    OMNI_TRY(message.from_stage, fields.string("from_stage"));
    OMNI_TRY(message.ok, fields.boolean("ok"));
    if (message.ok) {
        OMNI_TRY(std::uint32_t result, fields.map("result"));
        OMNI_TRY(message.result, detail::read_stage_payload(dom, result, "complete.result"));
    } else {
        OMNI_TRY(std::uint32_t error, fields.map("error"));
        FieldReader error_fields(dom, error, detail::kCompleteType, -1, "error");
        OMNI_TRY(std::string code, error_fields.string("code"));
        OMNI_TRY(message.error.message, error_fields.string("message"));
        read_error_code(code, message.error);
    }
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_stream(const Dom& dom, std::uint32_t map) {
    FieldReader fields(dom, map, detail::kStreamType);
    StreamMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    OMNI_TRY(message.from_stage, fields.string("from_stage"));
    OMNI_TRY(message.chunk_index, fields.integer("chunk_index"));
    OMNI_TRY(message.chunk, fields.any("chunk"));
    OMNI_TRY(message.metadata, fields.any("metadata"));
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_abort(const Dom& dom, std::uint32_t map) {
    FieldReader fields(dom, map, detail::kAbortType);
    AbortMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    OMNI_TRY(message.reason, fields.string("reason"));
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_shutdown(const Dom& dom, std::uint32_t map) {
    FieldReader fields(dom, map, detail::kShutdownType);
    ShutdownMessage message;
    OMNI_TRY(message.reason, fields.string("reason"));
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_profiler_start(const Dom& dom, std::uint32_t map) {
    FieldReader fields(dom, map, detail::kProfilerStartType);
    ProfilerStartMessage message;
    OMNI_TRY(message.trace_path_template, fields.string("trace_path_template"));
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_profiler_stop(const Dom&, std::uint32_t) {
    return ControlMessage(ProfilerStopMessage{});
}

Result<ControlMessage> read_heartbeat(const Dom& dom, std::uint32_t map) {
    FieldReader fields(dom, map, detail::kHeartbeatType);
    HeartbeatMessage message;
    OMNI_TRY(message.stage, fields.string("stage"));
    OMNI_TRY(message.pid, fields.integer("pid"));
    OMNI_TRY(message.queue_depth, fields.integer("queue_depth"));
    OMNI_TRY(message.active_requests, fields.integer("active_requests"));
    OMNI_TRY(message.processed, fields.integer("processed"));
    OMNI_TRY(auto compute_ns, fields.optional_integer("compute_ns"));
    message.compute_ns = compute_ns.value_or(0);
    for (auto [key, field] : {std::pair{"kv_blocks_used", &message.kv_blocks_used},
                              std::pair{"kv_blocks_total", &message.kv_blocks_total},
                              std::pair{"paused_requests", &message.paused_requests},
                              std::pair{"generated_tokens", &message.generated_tokens}}) {
        OMNI_TRY(auto number, fields.optional_integer(key));
        if (number && *number < 0) {
            return fail(ErrorCode::invalid_argument, fields.where(key) +
                                                         ": expected a non-negative int, got " +
                                                         std::to_string(*number));
        }
        *field = number.value_or(0);
    }
    OMNI_TRY(std::uint32_t edges, fields.optional_list("edges"));
    if (edges == detail::kNoNode) return ControlMessage(std::move(message));
    for (std::uint32_t item : detail::ListChildren(dom, edges)) {
        const std::size_t index = message.edges.size();
        if (dom.at(item).kind != detail::NodeKind::map) {
            return fail(
                detail::type_error(fields.where("edges") + "[" + std::to_string(index) + "]", "map",
                                   dom.at(item).kind));
        }
        FieldReader edge_fields(dom, item, detail::kHeartbeatType, static_cast<std::int64_t>(index),
                                "edges");
        EdgeTraffic edge;
        OMNI_TRY(edge.target, edge_fields.string("target"));
        OMNI_TRY(edge.transfers, edge_fields.non_negative("transfers"));
        OMNI_TRY(edge.bytes, edge_fields.non_negative("bytes"));
        OMNI_TRY(edge.write_ns, edge_fields.non_negative("write_ns"));
        OMNI_TRY(edge.delivery_ns, edge_fields.non_negative("delivery_ns"));
        message.edges.push_back(std::move(edge));
    }
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_pause(const Dom& dom, std::uint32_t map) {
    FieldReader fields(dom, map, detail::kPauseType);
    PauseMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    if (message.request_id.empty()) {
        return fail(ErrorCode::invalid_argument, fields.where("request_id") + ": empty");
    }
    OMNI_TRY(message.paused, fields.boolean("paused"));
    return ControlMessage(std::move(message));
}

using Reader = Result<ControlMessage> (*)(const Dom&, std::uint32_t);
constexpr Reader kReaders[] = {
    read_submit,   read_data_ready,     read_complete,      read_stream,    read_abort,
    read_shutdown, read_profiler_start, read_profiler_stop, read_heartbeat, read_pause};
static_assert(std::size(kReaders) == detail::kMessageTypeNames.size());

}  // namespace

Result<ControlMessage> decode_message(std::span<const std::uint8_t> bytes,
                                      const DecodeLimits& limits) {
    auto dom = detail::parse_dom(bytes, limits, detail::TensorMode::inline_data);
    if (!dom.has_value()) return fail(dom.error().with_context("control message"));
    if (dom->at(0).kind != detail::NodeKind::map) {
        return fail(detail::type_error("control message", "map", dom->at(0).kind));
    }
    FieldReader envelope(*dom, 0, "message");
    OMNI_TRY(std::int64_t version, envelope.integer("v"));
    if (version != kWireVersion) {
        return fail(ErrorCode::failed_precondition,
                    "unsupported wire version " + std::to_string(version) +
                        " (this build speaks version " + std::to_string(kWireVersion) + ")");
    }
    OMNI_TRY(std::string type, envelope.string("type"));
    for (std::size_t i = 0; i < detail::kMessageTypeNames.size(); ++i) {
        if (detail::kMessageTypeNames[i] == type) return kReaders[i](*dom, 0);
    }
    return fail(ErrorCode::invalid_argument, "unknown message type " + detail::quote(type));
}

}  // namespace omnirt::proto
