#pragma once
// Internal to proto/: the msgpack shape of a StagePayload, shared by control messages (tensors
// inline) and relay payload trees (tensors as placeholders):
//   {"request_id": str, "request": {"inputs": any, "params": any, "metadata": any}, "data": any}
#include <string_view>
#include <vector>

#include "core/request.h"
#include "proto/field_reader.h"
#include "proto/wire_writer.h"

namespace omnirt::proto::detail {

// Tensors are written inline when `collected` is null, otherwise as placeholders with paths
// rooted at the payload map.
void write_stage_payload(WireWriter& writer, const StagePayload& payload,
                         std::vector<CollectedTensor>* collected);

// Reads the payload map at node `map` (the caller checked its kind); `context` names it in
// errors (e.g. "submit.payload"). With a binder, the map is the root of a payload tree and its
// placeholders are bound with paths from that root.
[[nodiscard]] Result<StagePayload> read_stage_payload(const Dom& dom, std::uint32_t map,
                                                      std::string_view context,
                                                      PlaceholderBinder* binder = nullptr);

}  // namespace omnirt::proto::detail
