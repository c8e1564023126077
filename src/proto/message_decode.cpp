// Control message decoding: the bytes become a Value tree (proto/value_codec.h enforces the
// limits), then each message reads its fields out of the top-level map by name.
#include "proto/error_text.h"
#include "proto/field_reader.h"
#include "proto/message_names.h"
#include "proto/messages.h"
#include "proto/payload_header_wire.h"
#include "proto/stage_payload_wire.h"

namespace omnirt::proto {
namespace {

using detail::FieldReader;

Result<ControlMessage> read_submit(Map& map) {
    FieldReader fields(map, detail::kSubmitType);
    SubmitMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    OMNI_TRY(Map * payload, fields.map("payload"));
    OMNI_TRY(message.payload, detail::read_stage_payload(*payload, "submit.payload"));
    OMNI_TRY(message.deadline_unix_ms, fields.optional_integer("deadline_unix_ms"));
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_data_ready(Map& map) {
    FieldReader fields(map, detail::kDataReadyType);
    DataReadyMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    OMNI_TRY(message.from_stage, fields.string("from_stage"));
    OMNI_TRY(message.to_stage, fields.string("to_stage"));
    message.relay_metadata = fields.any("relay_metadata");
    OMNI_TRY(Map * header, fields.optional_map("header"));
    if (header != nullptr) {
        OMNI_TRY(message.header, detail::read_payload_header(*header, "data_ready.header"));
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

Result<ControlMessage> read_complete(Map& map) {
    FieldReader fields(map, detail::kCompleteType);
    CompleteMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    OMNI_TRY(message.from_stage, fields.string("from_stage"));
    OMNI_TRY(message.ok, fields.boolean("ok"));
    if (message.ok) {
        OMNI_TRY(Map * result, fields.map("result"));
        OMNI_TRY(message.result, detail::read_stage_payload(*result, "complete.result"));
    } else {
        OMNI_TRY(Map * error, fields.map("error"));
        FieldReader error_fields(*error, detail::kCompleteType, -1, "error");
        OMNI_TRY(std::string code, error_fields.string("code"));
        OMNI_TRY(message.error.message, error_fields.string("message"));
        read_error_code(code, message.error);
    }
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_stream(Map& map) {
    FieldReader fields(map, detail::kStreamType);
    StreamMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    OMNI_TRY(message.from_stage, fields.string("from_stage"));
    OMNI_TRY(message.chunk_index, fields.integer("chunk_index"));
    message.chunk = fields.any("chunk");
    message.metadata = fields.any("metadata");
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_abort(Map& map) {
    FieldReader fields(map, detail::kAbortType);
    AbortMessage message;
    OMNI_TRY(message.request_id, fields.string("request_id"));
    OMNI_TRY(message.reason, fields.string("reason"));
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_shutdown(Map& map) {
    FieldReader fields(map, detail::kShutdownType);
    ShutdownMessage message;
    OMNI_TRY(message.reason, fields.string("reason"));
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_profiler_start(Map& map) {
    FieldReader fields(map, detail::kProfilerStartType);
    ProfilerStartMessage message;
    OMNI_TRY(message.trace_path_template, fields.string("trace_path_template"));
    return ControlMessage(std::move(message));
}

Result<ControlMessage> read_profiler_stop(Map&) { return ControlMessage(ProfilerStopMessage{}); }

using Reader = Result<ControlMessage> (*)(Map&);
constexpr Reader kReaders[] = {read_submit,   read_data_ready, read_complete,       read_stream,
                               read_abort,    read_shutdown,   read_profiler_start, read_profiler_stop};
static_assert(std::size(kReaders) == detail::kMessageTypeNames.size());

}  // namespace

Result<ControlMessage> decode_message(std::span<const std::uint8_t> bytes,
                                      const DecodeLimits& limits) {
    auto root = decode_value(bytes, limits);
    if (!root.has_value()) return fail(root.error().with_context("control message"));
    Map* map = root->if_map();
    if (map == nullptr) return fail(detail::element_type_error("control message", "map", *root));
    FieldReader envelope(*map, "message");
    OMNI_TRY(std::int64_t version, envelope.integer("v"));
    if (version != kWireVersion) {
        return fail(ErrorCode::failed_precondition,
                    "unsupported wire version " + std::to_string(version) +
                        " (this build speaks version " + std::to_string(kWireVersion) + ")");
    }
    OMNI_TRY(std::string type, envelope.string("type"));
    for (std::size_t i = 0; i < detail::kMessageTypeNames.size(); ++i) {
        if (detail::kMessageTypeNames[i] == type) return kReaders[i](*map);
    }
    return fail(ErrorCode::invalid_argument, "unknown message type " + detail::quote(type));
}

}  // namespace omnirt::proto
