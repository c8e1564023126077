#pragma once
// Internal to proto/: the msgpack shape of a PayloadHeader (see proto/payload_codec.h), shared
// by encode_payload_header and the data_ready message.
#include <string_view>

#include "proto/field_reader.h"
#include "proto/payload_codec.h"
#include "proto/wire_writer.h"

namespace omnirt::proto::detail {

void write_payload_header(WireWriter& writer, const PayloadHeader& header);

// Reads the header map at node `map` (the caller checked its kind); `context` names it in
// errors ("data_ready.header"). Checks kinds, dtype names and shapes only; decode_payload
// checks the layout.
[[nodiscard]] Result<PayloadHeader> read_payload_header(const Dom& dom, std::uint32_t map,
                                                        std::string_view context);

}  // namespace omnirt::proto::detail
