#pragma once
// The backend-neutral relay form of a StagePayload (and of a stream chunk): a tensor-free tree
// plus one flat byte buffer holding every tensor. A relay backend moves only the flat buffer;
// the PayloadHeader travels in the DataReadyMessage (proto/messages.h).
//
//   sender:   encode_payload(payload) -> EncodedPayload {header, tensors}
//             allocate header.buffer_bytes (e.g. a relay slot), write_tensors(encoded, slot)
//   receiver: decode_payload(header, slot_tensor) -> StagePayload whose tensors are zero-copy
//             views of the slot: the slot's deleter runs when the last view is gone.
//
// Tree layout (msgpack, tensors as placeholders, see proto/value_codec.h):
//   payload: {"request_id": str, "request": {"inputs", "params", "metadata"}, "data": any}
//   blob:    {"chunk": any, "metadata": any}
// Tensor paths in tensor_info are rooted at the tree, e.g. ["data", "hidden", 0] or
// ["metadata", "codes"]. Tensor i of the buffer lies at tensor_info[i].offset, which is a
// multiple of kTensorAlignment (64); buffer_bytes is the end of the last tensor (0 if none).
//
// Thread safety: pure functions; call from any thread.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/request.h"
#include "core/tensor.h"
#include "core/value.h"
#include "proto/limits.h"
#include "proto/value_codec.h"

namespace omnirt::proto {

struct TensorInfo {
    TensorPath path;  // where the tensor sits in the tree
    DType dtype = DType::u8;
    Shape shape;
    std::uint64_t offset = 0;  // in the flat buffer
    std::uint64_t nbytes = 0;  // numel * element size (tensors are stored contiguous)
    friend bool operator==(const TensorInfo&, const TensorInfo&) = default;
};

struct PayloadHeader {
    std::vector<std::uint8_t> tree;       // msgpack, tensors replaced by placeholders
    std::vector<TensorInfo> tensor_info;  // placeholder i describes tensor_info[i]
    std::uint64_t buffer_bytes = 0;       // bytes of the flat buffer the tensors need
    friend bool operator==(const PayloadHeader&, const PayloadHeader&) = default;
};

// A header and the tensors it describes, before they are written to a buffer. The tensors
// share storage with the encoded payload (no copy happens until write_tensors).
struct EncodedPayload {
    PayloadHeader header;
    std::vector<Tensor> tensors;  // tensors[i] belongs to header.tensor_info[i]
};

// Encodes the tree and lays out the buffer. Tensors may live on any device; write_tensors
// handles host tensors (a device-aware relay gathers device tensors itself).
[[nodiscard]] Result<EncodedPayload> encode_payload(const StagePayload& payload);

// Writes every tensor of `encoded` (strided ones gathered) at its offset into `buffer` and
// zeroes the alignment padding; `buffer` must hold at least header.buffer_bytes (checked:
// aborts otherwise). Fails for non-host tensors.
[[nodiscard]] Status write_tensors(const EncodedPayload& encoded, std::span<std::byte> buffer);

// Convenience for same-host transports and tests: a fresh u8 tensor of buffer_bytes with the
// tensors written.
[[nodiscard]] Result<Tensor> make_flat_buffer(const EncodedPayload& encoded);

// Restores a payload. `flat_buffer` is a 1-D contiguous uint8 tensor of at least
// header.buffer_bytes (may be read-only, may live on any device; undefined is accepted when
// header.buffer_bytes is 0, i.e. every tensor is empty). Tensors are views sharing flat_buffer's
// storage. Validates that every tensor_info entry is referenced by exactly one placeholder standing
// at its path, that each tensor lies inside the buffer, is aligned to its element size, does not
// overlap another and has nbytes == numel * element size, and (for host buffers) that bool tensors
// hold only 0 and 1.
[[nodiscard]] Result<StagePayload> decode_payload(const PayloadHeader& header,
                                                  const Tensor& flat_buffer,
                                                  const DecodeLimits& limits = {});

// Stream chunks use the same form with the blob tree layout; tensor-valued metadata travels in
// the same buffer as the chunk's tensors.
struct StreamBlob {
    Value chunk;
    Value metadata;
    friend bool operator==(const StreamBlob&, const StreamBlob&) = default;
};
[[nodiscard]] Result<EncodedPayload> encode_blob(const Value& chunk, const Value& metadata);
[[nodiscard]] Result<StreamBlob> decode_blob(const PayloadHeader& header, const Tensor& flat_buffer,
                                             const DecodeLimits& limits = {});

// The header's own msgpack form, as embedded in a data_ready message:
//   {"tree": bin, "tensor_info": [{"path": [str|int...], "dtype": "float32", "shape": [int...],
//     "offset": int, "nbytes": int}...], "buffer_bytes": int}
// Offsets and sizes must fit int64. Decoding checks the syntax (types, dtype names, shapes);
// decode_payload checks the rest.
[[nodiscard]] Status encode_payload_header(const PayloadHeader& header,
                                           std::vector<std::uint8_t>& out);
[[nodiscard]] Result<PayloadHeader> decode_payload_header(std::span<const std::uint8_t> bytes,
                                                          const DecodeLimits& limits = {});

}  // namespace omnirt::proto
