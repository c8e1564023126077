#pragma once
// The request and payload objects that flow through a pipeline.
#include <string>

#include "core/error.h"
#include "core/value.h"

namespace omnirt {

// What a client asked for, normalised by the API layer.
struct OmniRequest {
    Value inputs;    // e.g. {"messages": [...]} or {"prompt": "..."}; may hold tensors
    Value params;    // sampling and per-stage parameters (a map)
    Value metadata;  // request-scoped facts that are not parameters (a map)
    friend bool operator==(const OmniRequest&, const OmniRequest&) = default;
};

// The unit of work a stage receives and emits. Between processes it travels through the relay
// (see proto/payload_codec.h); inside one process as std::shared_ptr<const StagePayload>.
struct StagePayload {
    std::string request_id;
    OmniRequest request;
    Value data;  // stage output / next stage input
    friend bool operator==(const StagePayload&, const StagePayload&) = default;
};

// Whether a request wants audio out, by the OmniRequest layout (docs/serve_openai.md): the speech
// API (metadata.api "audio.speech"), or a chat whose inputs.modalities holds "audio".
// invalid_argument when inputs.modalities is not a list of strings.
[[nodiscard]] Result<bool> wants_audio_output(const OmniRequest& request);

}  // namespace omnirt
