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

Result<StagePayload> read_stage_payload(const Dom& dom, std::uint32_t map, std::string_view context,
                                        PlaceholderBinder* binder) {
    static constexpr PathStep kRequest{.key = "request", .is_key = true};
    static constexpr PathStep kInputs[] = {kRequest, {.key = "inputs", .is_key = true}};
    static constexpr PathStep kParams[] = {kRequest, {.key = "params", .is_key = true}};
    static constexpr PathStep kMetadata[] = {kRequest, {.key = "metadata", .is_key = true}};
    static constexpr PathStep kData[] = {{.key = "data", .is_key = true}};
    FieldReader fields(dom, map, context);
    StagePayload payload;
    OMNI_TRY(payload.request_id, fields.string("request_id"));
    OMNI_TRY(std::uint32_t request, fields.map("request"));
    FieldReader request_fields(dom, request, context, -1, "request");
    OMNI_TRY(payload.request.inputs, request_fields.any("inputs", binder, kInputs));
    OMNI_TRY(payload.request.params, request_fields.any("params", binder, kParams));
    OMNI_TRY(payload.request.metadata, request_fields.any("metadata", binder, kMetadata));
    OMNI_TRY(payload.data, fields.any("data", binder, kData));
    return payload;
}

}  // namespace omnirt::proto::detail
