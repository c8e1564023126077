// Fuzzes relay payload and blob decoding. Input layout:
//   [u32 little-endian n][n bytes: PayloadHeader wire form (encode_payload_header)][flat buffer]
// The flat buffer is copied into fresh aligned storage. Anything that decodes must re-encode
// (encode_payload / encode_blob) and decode to the same payload.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "proto/payload_codec.h"

namespace {

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "payload_fuzz: %s\n", what);
    std::abort();
}

omnirt::Tensor round_trip_buffer(const omnirt::proto::EncodedPayload& encoded) {
    auto buffer = omnirt::proto::make_flat_buffer(encoded);
    if (!buffer.has_value()) die("make_flat_buffer failed on a re-encoded payload");
    return *buffer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace omnirt;
    if (size < 4) return 0;
    std::uint32_t header_size = 0;
    for (int i = 0; i < 4; ++i) header_size |= static_cast<std::uint32_t>(data[i]) << (8 * i);
    if (header_size > size - 4) return 0;
    const proto::DecodeLimits limits{.max_tensor_bytes = 1 << 20};
    auto header =
        proto::decode_payload_header(std::span<const std::uint8_t>(data + 4, header_size), limits);
    if (!header.has_value()) return 0;
    const std::size_t buffer_size = size - 4 - header_size;
    Tensor buffer = Tensor::empty({static_cast<std::int64_t>(buffer_size)}, DType::u8).value();
    if (buffer_size > 0) std::memcpy(buffer.mutable_data(), data + 4 + header_size, buffer_size);

    auto payload = proto::decode_payload(*header, buffer, limits);
    if (payload.has_value()) {
        auto encoded = proto::encode_payload(*payload);
        if (!encoded.has_value()) die("a decoded payload does not encode");
        auto again = proto::decode_payload(encoded->header, round_trip_buffer(*encoded), limits);
        if (!again.has_value()) die("a re-encoded payload does not decode");
        if (!(*again == *payload)) die("payload round trip changed the payload");
    }
    auto blob = proto::decode_blob(*header, buffer, limits);
    if (blob.has_value()) {
        auto encoded = proto::encode_blob(blob->chunk, blob->metadata);
        if (!encoded.has_value()) die("a decoded blob does not encode");
        auto again = proto::decode_blob(encoded->header, round_trip_buffer(*encoded), limits);
        if (!again.has_value()) die("a re-encoded blob does not decode");
        if (!(*again == *blob)) die("blob round trip changed the blob");
    }
    return 0;
}
