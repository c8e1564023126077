#include "pipeline/relay_io.h"

#include <span>
#include <utility>

namespace omnirt::pipeline {
namespace {

Result<RelayWrite> write_encoded(relay::Relay& relay, proto::EncodedPayload encoded,
                                 const std::string& request_id,
                                 std::optional<std::int64_t> dst_rank) {
    RelayWrite write;
    const std::uint64_t nbytes = encoded.header.buffer_bytes;
    if (nbytes > 0) {
        OMNI_TRY(Tensor buffer, relay.allocate_send_buffer(static_cast<std::size_t>(nbytes)));
        if (buffer.nbytes() < nbytes || buffer.read_only() || !buffer.is_contiguous()) {
            return fail(ErrorCode::internal, "relay send buffer is unusable (" +
                                                 std::to_string(buffer.nbytes()) + " bytes for " +
                                                 std::to_string(nbytes) + ")");
        }
        OMNI_RETURN_IF_ERROR(proto::write_tensors(
            encoded,
            std::span<std::byte>(buffer.mutable_data(), static_cast<std::size_t>(nbytes))));
        OMNI_TRY(write.put, relay.put_async(buffer, request_id, dst_rank));
        write.relay_metadata = write.put->metadata();
    }
    write.header = std::move(encoded.header);
    return write;
}

// A get into memory of our own, or a view of the sender's (see ReadMode).
Result<Tensor> get_buffer(relay::Relay& relay, const Value& relay_metadata, std::size_t nbytes,
                          const std::string& request_id, const ReadOptions& options) {
    const bool zero_copy = relay.capabilities().zero_copy_receive;
    const bool copy = options.mode == ReadMode::copy || nbytes < kCopyBelowBytes;
    // With a zero-copy relay, copies go through a view (validated by the relay before any
    // allocation, so hostile sizes cost nothing) and a clone that releases the slot at once.
    OMNI_TRY(auto get, relay.get_async(relay_metadata, Tensor(), request_id));
    OMNI_RETURN_IF_ERROR(get->wait_for_completion(options.timeout));
    Tensor tensor = get->tensor();
    get.reset();
    if (!tensor.defined()) {
        return fail(ErrorCode::aborted,
                    "relay read of request '" + request_id + "' was cleaned up");
    }
    if (tensor.dtype() != DType::u8 || tensor.dim() != 1 || !tensor.is_contiguous() ||
        tensor.nbytes() != nbytes) {
        return fail(ErrorCode::data_loss, "relay returned a buffer of " +
                                              std::to_string(tensor.nbytes()) +
                                              " bytes, expected " + std::to_string(nbytes));
    }
    if (copy && zero_copy) return tensor.clone();
    return tensor;
}

}  // namespace

Result<RelayWrite> write_payload(relay::Relay& relay, const StagePayload& payload,
                                 std::optional<std::int64_t> dst_rank) {
    OMNI_TRY(proto::EncodedPayload encoded, proto::encode_payload(payload));
    return write_encoded(relay, std::move(encoded), payload.request_id, dst_rank);
}

Result<RelayWrite> write_stream_chunk(relay::Relay& relay, const std::string& request_id,
                                      const Value& chunk, const Value& metadata,
                                      std::optional<std::int64_t> dst_rank) {
    OMNI_TRY(proto::EncodedPayload encoded, proto::encode_blob(chunk, metadata));
    return write_encoded(relay, std::move(encoded), request_id, dst_rank);
}

Result<Tensor> read_buffer(relay::Relay& relay, const proto::PayloadHeader& header,
                           const Value& relay_metadata, const std::string& request_id,
                           const ReadOptions& options) {
    if (relay_metadata.is_null()) {
        if (header.buffer_bytes != 0) {
            return fail(ErrorCode::invalid_argument,
                        "data_ready has no relay metadata but its header needs " +
                            std::to_string(header.buffer_bytes) + " bytes");
        }
        return Tensor();
    }
    // A tiered relay (several nodes) reads the metadata of each of its backends.
    const Value* written_by = relay_metadata.is_map() ? relay_metadata.find("backend") : nullptr;
    const std::string_view backend = written_by != nullptr && written_by->is_string() &&
                                             relay.reads_backend(written_by->as_string())
                                         ? std::string_view(written_by->as_string())
                                         : relay.backend();
    OMNI_TRY(relay::CommonMetadata common, relay::read_common_metadata(relay_metadata, backend));
    // Read before judging the size, so that a transfer we refuse still returns the sender's slot.
    OMNI_TRY(Tensor buffer, get_buffer(relay, relay_metadata, common.nbytes, request_id, options));
    if (common.nbytes < header.buffer_bytes) {
        return fail(ErrorCode::data_loss, "relay transfer has " + std::to_string(common.nbytes) +
                                              " bytes but the header needs " +
                                              std::to_string(header.buffer_bytes));
    }
    return buffer;
}

Result<StagePayload> read_payload(relay::Relay& relay, const proto::PayloadHeader& header,
                                  const Value& relay_metadata, const std::string& request_id,
                                  const ReadOptions& options) {
    OMNI_TRY(Tensor buffer, read_buffer(relay, header, relay_metadata, request_id, options));
    return proto::decode_payload(header, buffer);
}

Result<proto::StreamBlob> read_stream_chunk(relay::Relay& relay, const proto::PayloadHeader& header,
                                            const Value& relay_metadata,
                                            const std::string& request_id,
                                            const ReadOptions& options) {
    OMNI_TRY(Tensor buffer, read_buffer(relay, header, relay_metadata, request_id, options));
    return proto::decode_blob(header, buffer);
}

Status discard_transfer(relay::Relay& relay, const Value& relay_metadata,
                        const std::string& request_id, std::chrono::milliseconds timeout) {
    if (relay_metadata.is_null()) return ok_status();
    OMNI_TRY(auto get, relay.get_async(relay_metadata, Tensor(), request_id));
    Status status = get->wait_for_completion(timeout);
    // Dropping the operation and its buffer (a view: its last reference) releases the slot.
    return status;
}

}  // namespace omnirt::pipeline
