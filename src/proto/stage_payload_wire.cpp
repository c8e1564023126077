#include "proto/stage_payload_wire.h"

namespace omnirt::proto::detail {
namespace {

// Base paths of the placeholder-mode subtrees, built once.
const TensorPath& path_of(std::string_view first, std::string_view second = {}) {
    static const TensorPath kInputs{std::string("request"), std::string("inputs")};
    static const TensorPath kParams{std::string("request"), std::string("params")};
    static const TensorPath kMetadata{std::string("request"), std::string("metadata")};
    static const TensorPath kData{std::string("data")};
    if (first == "data") return kData;
    if (second == "inputs") return kInputs;
    if (second == "params") return kParams;
    return kMetadata;
}

}  // namespace

void write_stage_payload(WireWriter& writer, const StagePayload& payload,
                         std::vector<CollectedTensor>* collected) {
    writer.map_header(3);
    writer.field("request_id", payload.request_id);
    writer.str("request");
    writer.map_header(3);
    writer.str("inputs");
    writer.value(payload.request.inputs, collected, path_of("request", "inputs"));
    writer.str("params");
    writer.value(payload.request.params, collected, path_of("request", "params"));
    writer.str("metadata");
    writer.value(payload.request.metadata, collected, path_of("request", "metadata"));
    writer.str("data");
    writer.value(payload.data, collected, path_of("data"));
}

Result<StagePayload> read_stage_payload(Map& map, std::string_view context) {
    FieldReader fields(map, context);
    StagePayload payload;
    OMNI_TRY(payload.request_id, fields.string("request_id"));
    OMNI_TRY(Map * request, fields.map("request"));
    FieldReader request_fields(*request, context, -1, "request");
    payload.request.inputs = request_fields.any("inputs");
    payload.request.params = request_fields.any("params");
    payload.request.metadata = request_fields.any("metadata");
    payload.data = fields.any("data");
    return payload;
}

}  // namespace omnirt::proto::detail
