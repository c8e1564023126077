// Control message encoding: one pass of msgpack writes straight into the output vector; no
// intermediate Value tree and no per-field allocation.
#include <array>

#include "proto/message_names.h"
#include "proto/messages.h"
#include "proto/payload_header_wire.h"
#include "proto/stage_payload_wire.h"
#include "proto/wire_writer.h"

namespace omnirt::proto {
namespace {

using detail::WireWriter;

// Starts the message map: "v", "type", then `fields` more entries.
void envelope(WireWriter& writer, std::size_t fields, std::string_view type) {
    writer.map_header(fields + 2);
    writer.str("v");
    writer.integer(kWireVersion);
    writer.field("type", type);
}

void write_body(WireWriter& writer, const SubmitMessage& message) {
    envelope(writer, 2 + (message.deadline_unix_ms ? 1 : 0), detail::kSubmitType);
    writer.field("request_id", message.request_id);
    writer.str("payload");
    detail::write_stage_payload(writer, message.payload, nullptr);
    if (message.deadline_unix_ms) {
        writer.str("deadline_unix_ms");
        writer.integer(*message.deadline_unix_ms);
    }
}

void write_body(WireWriter& writer, const DataReadyMessage& message) {
    const std::size_t optional_fields =
        (message.header ? 1 : 0) + (message.chunk_id ? 1 : 0) + (message.error ? 1 : 0);
    envelope(writer, 5 + optional_fields, detail::kDataReadyType);
    writer.field("request_id", message.request_id);
    writer.field("from_stage", message.from_stage);
    writer.field("to_stage", message.to_stage);
    writer.str("relay_metadata");
    writer.value(message.relay_metadata);
    if (message.header) {
        writer.str("header");
        detail::write_payload_header(writer, *message.header);
    }
    if (message.chunk_id) {
        writer.str("chunk_id");
        writer.integer(*message.chunk_id);
    }
    writer.str("is_done");
    writer.boolean(message.is_done);
    if (message.error) writer.field("error", *message.error);
}

void write_body(WireWriter& writer, const CompleteMessage& message) {
    envelope(writer, 4, detail::kCompleteType);
    writer.field("request_id", message.request_id);
    writer.field("from_stage", message.from_stage);
    writer.str("ok");
    writer.boolean(message.ok);
    if (message.ok) {
        writer.str("result");
        detail::write_stage_payload(writer, message.result, nullptr);
    } else {
        writer.str("error");
        writer.map_header(2);
        writer.field("code", to_string(message.error.code));
        writer.field("message", message.error.message);
    }
}

void write_body(WireWriter& writer, const StreamMessage& message) {
    envelope(writer, 5, detail::kStreamType);
    writer.field("request_id", message.request_id);
    writer.field("from_stage", message.from_stage);
    writer.str("chunk_index");
    writer.integer(message.chunk_index);
    writer.str("chunk");
    writer.value(message.chunk);
    writer.str("metadata");
    writer.value(message.metadata);
}

void write_body(WireWriter& writer, const AbortMessage& message) {
    envelope(writer, 2, detail::kAbortType);
    writer.field("request_id", message.request_id);
    writer.field("reason", message.reason);
}

void write_body(WireWriter& writer, const ShutdownMessage& message) {
    envelope(writer, 1, detail::kShutdownType);
    writer.field("reason", message.reason);
}

void write_body(WireWriter& writer, const ProfilerStartMessage& message) {
    envelope(writer, 1, detail::kProfilerStartType);
    writer.field("trace_path_template", message.trace_path_template);
}

void write_body(WireWriter& writer, const ProfilerStopMessage&) {
    envelope(writer, 0, detail::kProfilerStopType);
}

void write_body(WireWriter& writer, const HeartbeatMessage& message) {
    envelope(writer, 11, detail::kHeartbeatType);
    writer.field("stage", message.stage);
    writer.str("pid");
    writer.integer(message.pid);
    writer.str("queue_depth");
    writer.integer(message.queue_depth);
    writer.str("active_requests");
    writer.integer(message.active_requests);
    writer.str("processed");
    writer.integer(message.processed);
    writer.str("compute_ns");
    writer.integer(message.compute_ns);
    for (auto [key, number] : {std::pair{"kv_blocks_used", message.kv_blocks_used},
                               std::pair{"kv_blocks_total", message.kv_blocks_total},
                               std::pair{"paused_requests", message.paused_requests},
                               std::pair{"generated_tokens", message.generated_tokens}}) {
        writer.str(key);
        writer.integer(number);
    }
    writer.str("edges");
    writer.list_header(message.edges.size());
    for (const auto& edge : message.edges) {
        writer.map_header(5);
        writer.field("target", edge.target);
        for (auto [key, number] :
             {std::pair{"transfers", edge.transfers}, std::pair{"bytes", edge.bytes},
              std::pair{"write_ns", edge.write_ns}, std::pair{"delivery_ns", edge.delivery_ns}}) {
            writer.str(key);
            writer.integer(number);
        }
    }
}

void write_body(WireWriter& writer, const PauseMessage& message) {
    envelope(writer, 2, detail::kPauseType);
    writer.field("request_id", message.request_id);
    writer.str("paused");
    writer.boolean(message.paused);
}

}  // namespace

std::string_view message_type_name(const ControlMessage& message) {
    return detail::kMessageTypeNames[message.index()];
}

const std::string& request_id_of(const ControlMessage& message) {
    static const std::string kNone;
    return std::visit(
        [](const auto& m) -> const std::string& {
            if constexpr (requires { m.request_id; }) {
                return m.request_id;
            } else {
                return kNone;
            }
        },
        message);
}

Status encode_message(const ControlMessage& message, std::vector<std::uint8_t>& out) {
    WireWriter writer(out);
    std::visit([&writer](const auto& m) { write_body(writer, m); }, message);
    return writer.status();
}

Result<std::vector<std::uint8_t>> encode_message(const ControlMessage& message) {
    std::vector<std::uint8_t> out;
    out.reserve(256);
    OMNI_RETURN_IF_ERROR(encode_message(message, out));
    return out;
}

}  // namespace omnirt::proto
