#pragma once
// Stage-facing relay helpers (communication.md, "Normal Payload Flow" and "Streaming Flow"):
// full payloads and stream chunks in the backend-neutral form of proto/payload_codec.h.
//
//   sender:   write = write_payload(relay, payload, dst_rank)   // blocks while out of credits
//             send DataReadyMessage{relay_metadata = write.relay_metadata, header = write.header}
//             write.put->wait_for_completion(...)               // control BEFORE wait
//   receiver: read_payload(relay, header, relay_metadata, request_id, options)
//             or discard_transfer(...) for a message it drops, so the sender's credit returns.
//
// A payload without tensors (header.buffer_bytes == 0) moves no relay data: relay_metadata is
// null and there is no put.
//
// Thread safety: as the Relay; every function may be called from any thread, and blocks.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/request.h"
#include "core/tensor.h"
#include "core/value.h"
#include "proto/payload_codec.h"
#include "relay/relay.h"

namespace omnirt::pipeline {

// Payloads below this size are copied out of the relay (so the sender's slot returns at once)
// even where a zero-copy view is possible.
inline constexpr std::size_t kCopyBelowBytes = std::size_t{64} << 10;

// A payload or chunk handed to the relay, ready for its data_ready message.
struct RelayWrite {
    proto::PayloadHeader header;
    Value relay_metadata;                      // null when header.buffer_bytes == 0
    std::unique_ptr<relay::PutOperation> put;  // null when header.buffer_bytes == 0
};

// Encodes `payload` and starts the put of its tensors to `dst_rank`.
[[nodiscard]] Result<RelayWrite> write_payload(relay::Relay& relay, const StagePayload& payload,
                                               std::optional<std::int64_t> dst_rank);
// The same for one stream chunk (blob form; tensor-valued metadata shares the buffer).
[[nodiscard]] Result<RelayWrite> write_stream_chunk(relay::Relay& relay,
                                                    const std::string& request_id,
                                                    const Value& chunk, const Value& metadata,
                                                    std::optional<std::int64_t> dst_rank);

enum class ReadMode : std::uint8_t {
    copy,  // the data lands in memory of its own; the sender's slot returns at once
    view,  // a read-only view of the sender's memory where the relay can; copies of small
           // transfers (< kCopyBelowBytes) anyway
};

struct ReadOptions {
    ReadMode mode = ReadMode::copy;
    std::chrono::milliseconds timeout{60000};
};

// The flat buffer a data_ready describes: undefined when relay_metadata is null and the header
// needs no bytes. Fails (invalid_argument / data_loss / the relay's error) for metadata the relay
// refuses, metadata without a buffer the header needs, or a buffer smaller than the header says.
[[nodiscard]] Result<Tensor> read_buffer(relay::Relay& relay, const proto::PayloadHeader& header,
                                         const Value& relay_metadata, const std::string& request_id,
                                         const ReadOptions& options);
[[nodiscard]] Result<StagePayload> read_payload(relay::Relay& relay,
                                                const proto::PayloadHeader& header,
                                                const Value& relay_metadata,
                                                const std::string& request_id,
                                                const ReadOptions& options);
[[nodiscard]] Result<proto::StreamBlob> read_stream_chunk(relay::Relay& relay,
                                                          const proto::PayloadHeader& header,
                                                          const Value& relay_metadata,
                                                          const std::string& request_id,
                                                          const ReadOptions& options);

// Reads and throws away the transfer `relay_metadata` describes, so that the sender's credit
// (slot) is released for a message the receiver drops. A no-op for null metadata; errors (stale
// or foreign metadata: nothing to release) are returned for logging only.
Status discard_transfer(relay::Relay& relay, const Value& relay_metadata,
                        const std::string& request_id, std::chrono::milliseconds timeout);

}  // namespace omnirt::pipeline
