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

// Moves the payload out of `map`; `context` names the map in errors (e.g. "submit.payload").
[[nodiscard]] Result<StagePayload> read_stage_payload(Map& map, std::string_view context);

}  // namespace omnirt::proto::detail
