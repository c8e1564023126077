// ChatRequest -> OmniRequest (layout in chat_request.h and docs/serve_openai.md).
#include "serve/openai/chat_request.h"

namespace omnirt::serve::openai {
namespace {

Value part_to_value(const ContentPart& part) {
    Map out;
    if (part.type == ContentPartType::text) {
        out.emplace("type", Value("text"));
        out.emplace("text", Value(part.text));
        return Value(std::move(out));
    }
    const MediaInput& media = part.media;
    out.emplace("type", Value(to_string(media.kind)));
    out.emplace("mime", Value(media.mime));
    out.emplace("source", Value(to_string(media.source)));
    switch (media.source) {
        case MediaSource::bytes:
            out.emplace("data", Value(Bytes{media.bytes}));
            break;
        case MediaSource::path:
            out.emplace("path", Value(media.path));
            break;
        case MediaSource::remote_url:
            out.emplace("url", Value(media.url));
            break;
    }
    if (!part.detail.empty()) out.emplace("detail", Value(part.detail));
    return Value(std::move(out));
}

Value string_list(const std::vector<std::string>& items) {
    List out;
    out.reserve(items.size());
    for (const auto& item : items) out.emplace_back(item);
    return Value(std::move(out));
}

}  // namespace

OmniRequest to_omni_request(const ChatRequest& request) {
    List messages;
    messages.reserve(request.messages.size());
    for (const auto& message : request.messages) {
        Map entry;
        entry.emplace("role", Value(message.role));
        List content;
        content.reserve(message.content.size());
        for (const auto& part : message.content) content.push_back(part_to_value(part));
        entry.emplace("content", Value(std::move(content)));
        if (!message.name.empty()) entry.emplace("name", Value(message.name));
        if (!message.tool_call_id.empty())
            entry.emplace("tool_call_id", Value(message.tool_call_id));
        messages.emplace_back(std::move(entry));
    }
    OmniRequest out;
    Map inputs;
    inputs.emplace("messages", Value(std::move(messages)));
    inputs.emplace("modalities", string_list(request.modalities));
    Map audio;
    audio.emplace("voice", Value(request.audio_voice));
    audio.emplace("format", Value(request.audio_format));
    inputs.emplace("audio", Value(std::move(audio)));
    out.inputs = Value(std::move(inputs));

    Map params;
    Value sampling = sampling_to_value(request.sampling);
    if (request.logprobs) {
        sampling["logprobs"] = Value(true);
        sampling["top_logprobs"] = Value(request.top_logprobs.value_or(0));
    }
    params.emplace("sampling", std::move(sampling));
    put_stage_overrides(request.stage_sampling, request.stage_params, params);
    if (request.max_tokens) params.emplace("max_tokens", Value(*request.max_tokens));
    params.emplace("stop", string_list(request.stop));
    if (request.sampling.seed) params.emplace("seed", Value(*request.sampling.seed));
    params.emplace("stream", Value(request.stream));
    out.params = Value(std::move(params));

    Map metadata;
    metadata.emplace("api", Value("chat.completions"));
    metadata.emplace("model", Value(request.model));
    // The routing key of stage replicas (pipeline/replica_routing.h).
    if (!request.user.empty()) metadata.emplace("user", Value(request.user));
    out.metadata = Value(std::move(metadata));
    return out;
}

}  // namespace omnirt::serve::openai
