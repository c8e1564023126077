#pragma once
// Control-plane messages and their msgpack wire form.
//
// Every message is one msgpack map {"v": kWireVersion, "type": <name>, ...fields}, field names
// as in the structs below. Decoding rules:
//  * "v" must equal kWireVersion and "type" must be a known name; otherwise an error names both;
//  * a required field that is absent or of the wrong kind is an error naming the field and the
//    expected kind ("data_ready.chunk_id: expected int, got string");
//  * an optional field may be absent or nil; the encoder omits unset optionals;
//  * a Value-typed field may be absent and reads as null;
//  * unknown extra fields are ignored, so a newer sender may add fields without breaking older
//    receivers (a change that older receivers must not ignore bumps kWireVersion).
// Tensors inside control messages (submit/complete payloads, stream chunks) are encoded inline;
// bulk tensors travel through the relay and only their PayloadHeader rides in data_ready.
//
// Thread safety: pure functions; call from any thread.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/request.h"
#include "core/value.h"
#include "proto/limits.h"
#include "proto/payload_codec.h"

namespace omnirt::proto {

inline constexpr std::int64_t kWireVersion = 1;

// Coordinator -> entry stage: a new request. Wire type "submit".
struct SubmitMessage {
    std::string request_id;
    StagePayload payload;
    std::optional<std::int64_t> deadline_unix_ms;  // absolute, milliseconds since the epoch
    friend bool operator==(const SubmitMessage&, const SubmitMessage&) = default;
};

// Stage -> stage: data is waiting in the relay. Wire type "data_ready". Three uses:
//  * a full payload: header set (decode with decode_payload), chunk_id unset;
//  * a stream chunk: header set (decode with decode_blob), chunk_id set;
//  * a control-only stream signal: header unset, is_done and/or error set.
struct DataReadyMessage {
    std::string request_id;
    std::string from_stage;
    std::string to_stage;
    Value relay_metadata;                  // backend-specific, from the relay's put operation
    std::optional<PayloadHeader> header;   // absent for control-only signals
    std::optional<std::int64_t> chunk_id;  // stream chunks only
    bool is_done = false;                  // the stream has ended
    std::optional<std::string> error;      // the stream failed with this message
    friend bool operator==(const DataReadyMessage&, const DataReadyMessage&) = default;
};

// Terminal stage -> coordinator: a request finished. Wire type "complete"; the wire carries
// "result" when ok and "error" ({"code": name, "message": str}) otherwise. An unknown error code
// name decodes as ErrorCode::internal with the name kept in the message.
struct CompleteMessage {
    std::string request_id;
    std::string from_stage;
    bool ok = true;
    StagePayload result;  // meaningful when ok
    Error error;          // meaningful when !ok
    friend bool operator==(const CompleteMessage&, const CompleteMessage&) = default;
};

// Stage -> coordinator: one streamed output chunk for the client. Wire type "stream".
struct StreamMessage {
    std::string request_id;
    std::string from_stage;
    std::int64_t chunk_index = 0;
    Value chunk;
    Value metadata;
    friend bool operator==(const StreamMessage&, const StreamMessage&) = default;
};

// Coordinator -> all stages (broadcast): drop a request. Wire type "abort".
struct AbortMessage {
    std::string request_id;
    std::string reason;
    friend bool operator==(const AbortMessage&, const AbortMessage&) = default;
};

// Coordinator -> all stages (broadcast): hold a request (paused) or let it go on (not paused).
// Wire type "pause". The HTTP server asks for it when a client reads a stream slower than the
// pipeline produces it (docs/serve.md, "Slow readers"). Advisory: a stage holds what it has for
// the request (KV cache, queued chunks) and produces nothing more for it until the resume; a
// stage that does not know the request, or cannot hold requests, ignores it. An abort ends a
// pause.
struct PauseMessage {
    std::string request_id;
    bool paused = true;
    friend bool operator==(const PauseMessage&, const PauseMessage&) = default;
};

// Coordinator -> stage: stop. Wire type "shutdown".
struct ShutdownMessage {
    std::string reason;
    friend bool operator==(const ShutdownMessage&, const ShutdownMessage&) = default;
};

// Coordinator -> stage: start a profiler trace. Wire type "profiler_start". The receiver turns
// the template into its own trace path; proto/ does not interpret it.
struct ProfilerStartMessage {
    std::string trace_path_template;
    friend bool operator==(const ProfilerStartMessage&, const ProfilerStartMessage&) = default;
};

// Coordinator -> stage: stop and write the trace. Wire type "profiler_stop".
struct ProfilerStopMessage {
    friend bool operator==(const ProfilerStopMessage&, const ProfilerStopMessage&) = default;
};

// Stage -> coordinator, periodically: liveness and load for the coordinator's health
// report. Wire type "heartbeat".
// Traffic from a stage to one target stage in another process since the stage started:
// payloads and stream chunks (those without tensor bytes travel in the control message alone;
// same-process hand-offs are not counted).
struct EdgeTraffic {
    std::string target;
    std::int64_t transfers = 0;
    std::int64_t bytes = 0;        // tensor bytes moved
    std::int64_t write_ns = 0;     // encoding and writing into the relay (the sender's side)
    std::int64_t delivery_ns = 0;  // from the put to the receiver taking the data
    friend bool operator==(const EdgeTraffic&, const EdgeTraffic&) = default;
};

struct HeartbeatMessage {
    std::string stage;
    std::int64_t pid = 0;
    std::int64_t queue_depth = 0;      // work waiting in the stage (inbox + pending fan-in)
    std::int64_t active_requests = 0;  // requests the stage holds state for
    std::int64_t processed = 0;        // results emitted since start
    // Optional on the wire (absent: 0 / none), so older stages still talk to newer coordinators.
    std::int64_t compute_ns = 0;     // time the scheduler spent in compute since start
    std::vector<EdgeTraffic> edges;  // relay traffic per target, in target-name order
    // Schedulers with a KV cache (the AR engine; absent: 0): blocks held by requests (the
    // prefix cache's not counted) and in all; requests held by a pause; tokens generated since
    // the stage started.
    std::int64_t kv_blocks_used = 0;
    std::int64_t kv_blocks_total = 0;
    std::int64_t paused_requests = 0;
    std::int64_t generated_tokens = 0;
    friend bool operator==(const HeartbeatMessage&, const HeartbeatMessage&) = default;
};

using ControlMessage = std::variant<SubmitMessage, DataReadyMessage, CompleteMessage, StreamMessage,
                                    AbortMessage, ShutdownMessage, ProfilerStartMessage,
                                    ProfilerStopMessage, HeartbeatMessage, PauseMessage>;

// The wire "type" of a message: "submit", "data_ready", "complete", "stream", "abort",
// "shutdown", "profiler_start", "profiler_stop", "heartbeat" or "pause".
[[nodiscard]] std::string_view message_type_name(const ControlMessage& message);
// The request a message is about; an empty string for shutdown and profiler messages.
[[nodiscard]] const std::string& request_id_of(const ControlMessage& message);

// Appends the encoding of `message` to `out` (reuse one buffer to avoid reallocations). Fails
// only for unencodable contents (undefined or device tensors inline, strings over 4 GiB); `out`
// then holds a partial encoding the caller must drop.
[[nodiscard]] Status encode_message(const ControlMessage& message, std::vector<std::uint8_t>& out);
[[nodiscard]] Result<std::vector<std::uint8_t>> encode_message(const ControlMessage& message);

[[nodiscard]] Result<ControlMessage> decode_message(
    std::span<const std::uint8_t> bytes, const DecodeLimits& limits = DecodeLimits::control());

}  // namespace omnirt::proto
