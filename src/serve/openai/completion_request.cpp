#include "serve/openai/completion_request.h"

#include "serve/openai/chat_request.h"
#include "serve/openai/common_fields.h"
#include "serve/openai/json_body.h"

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::json;

// Token ids of a JSON array (path names it in errors), each in [0, 2^31).
ProtocolResult<std::vector<std::int64_t>> token_ids(const Json& array, const std::string& path,
                                                    const RequestLimits& limits) {
    if (array.size() > limits.max_string_bytes) {
        return invalid_request(path, "'" + path + "' has too many token ids");
    }
    std::vector<std::int64_t> ids;
    ids.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i) {
        const Json& id = array[i];
        const bool ok = is_token_id(id);
        if (!ok) {
            const std::string item = index_path(path, i);
            return invalid_request(item, "'" + item + "' must be a token id (an integer >= 0)");
        }
        ids.push_back(id.get<std::int64_t>());
    }
    return ids;
}

ProtocolResult<std::variant<std::string, std::vector<std::int64_t>>> parse_prompt(
    const Json& body, const RequestLimits& limits) {
    const auto it = body.find("prompt");
    if (it == body.end() || it->is_null()) return invalid_request("prompt", "'prompt' is required");
    const Json* prompt = &*it;
    std::string path = "prompt";
    // [x] with one string or one id list is that prompt; a list of ints is one prompt of ids.
    if (prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_number()) {
        if (prompt->size() != 1) {
            return invalid_request("prompt",
                                   "'prompt' holds " + std::to_string(prompt->size()) +
                                       " prompts; this server takes one prompt per request");
        }
        prompt = &(*prompt)[0];
        path = "prompt[0]";
    }
    if (prompt->is_string()) {
        const auto& text = prompt->get_ref<const std::string&>();
        if (text.empty()) return invalid_request(path, "'" + path + "' is empty");
        if (text.size() > limits.max_string_bytes) {
            return invalid_request(path, "'" + path + "' is too long");
        }
        return text;
    }
    if (prompt->is_array()) {
        if (prompt->empty()) return invalid_request(path, "'" + path + "' is empty");
        OMNI_TRY_P(auto ids, token_ids(*prompt, path, limits));
        return ids;
    }
    return invalid_request(path, "'" + path + "' must be a string or an array of token ids, not " +
                                     std::string(json_type_name(*prompt)));
}

// A field this server does not implement, refused unless it has its neutral value.
ProtocolStatus refuse_unless(bool neutral, const char* field, const char* why) {
    if (neutral) return {};
    return invalid_request(field, std::string("'") + field + "' " + why);
}

}  // namespace

ProtocolResult<CompletionRequest> parse_completion_request(std::string_view body,
                                                           const RequestLimits& limits) {
    OMNI_TRY_P(const Json json, parse_body(body, limits));
    CompletionRequest out;
    OMNI_TRY_P(auto model, read_string(json, "model", "", 256));
    if (!model || model->empty()) return invalid_request("model", "'model' is required");
    out.model = std::move(*model);
    OMNI_TRY_P(out.prompt, parse_prompt(json, limits));
    OMNI_TRY_P(out.sampling, parse_sampling(json, ""));
    OMNI_TRY_P(auto max_tokens, read_int(json, "max_tokens", ""));
    if (max_tokens) {
        if (*max_tokens < 1 || *max_tokens > limits.max_tokens) {
            return invalid_request("max_tokens", "'max_tokens' must be in [1, " +
                                                     std::to_string(limits.max_tokens) + "], got " +
                                                     std::to_string(*max_tokens));
        }
        out.max_tokens = *max_tokens;
    }
    OMNI_TRY_P(out.stop, parse_stop(json, limits));
    OMNI_TRY_P(StreamFields stream, parse_stream_fields(json));
    out.stream = stream.stream;
    out.include_usage = stream.include_usage;
    OMNI_TRY_P(out.logprobs, read_int(json, "logprobs", ""));
    if (out.logprobs && (*out.logprobs < 0 || *out.logprobs > kMaxTopLogprobs)) {
        return invalid_request("logprobs", "'logprobs' must be in [0, " +
                                               std::to_string(kMaxTopLogprobs) + "], got " +
                                               std::to_string(*out.logprobs));
    }
    OMNI_TRY_P(auto n, read_int(json, "n", ""));
    OMNI_RETURN_IF_ERROR_P(refuse_unless(
        !n || *n == 1, "n", "must be 1: this server generates one choice per request"));
    OMNI_TRY_P(auto best_of, read_int(json, "best_of", ""));
    OMNI_RETURN_IF_ERROR_P(
        refuse_unless(!best_of || *best_of == 1, "best_of",
                      "must be 1: this server generates one choice per request"));
    OMNI_TRY_P(auto echo, read_bool(json, "echo", ""));
    OMNI_RETURN_IF_ERROR_P(refuse_unless(!echo || !*echo, "echo",
                                         "is not supported: the answer holds the completion only"));
    OMNI_TRY_P(auto suffix, read_string(json, "suffix", "", limits.max_string_bytes));
    OMNI_RETURN_IF_ERROR_P(refuse_unless(!suffix || suffix->empty(), "suffix",
                                         "is not supported (no fill-in-the-middle)"));
    OMNI_TRY_P(auto overrides, parse_stage_overrides(json, limits));
    out.stage_sampling = std::move(overrides.sampling);
    out.stage_params = std::move(overrides.params);
    return out;
}

OmniRequest to_omni_request(const CompletionRequest& request) {
    OmniRequest out;
    Map inputs;
    if (const auto* text = std::get_if<std::string>(&request.prompt)) {
        inputs.emplace("prompt", Value(*text));
    } else {
        List ids;
        for (std::int64_t id : std::get<std::vector<std::int64_t>>(request.prompt))
            ids.emplace_back(id);
        inputs.emplace("prompt", Value(std::move(ids)));
    }
    out.inputs = Value(std::move(inputs));

    Map params;
    Value sampling = sampling_to_value(request.sampling);
    if (request.logprobs) {
        sampling["logprobs"] = Value(true);
        sampling["top_logprobs"] = Value(*request.logprobs);
    }
    params.emplace("sampling", std::move(sampling));
    put_stage_overrides(request.stage_sampling, request.stage_params, params);
    params.emplace("max_tokens", Value(request.max_tokens));
    List stop;
    for (const auto& entry : request.stop) stop.emplace_back(entry);
    params.emplace("stop", Value(std::move(stop)));
    if (request.sampling.seed) params.emplace("seed", Value(*request.sampling.seed));
    params.emplace("stream", Value(request.stream));
    out.params = Value(std::move(params));

    out.metadata = Value(Map{{"api", Value("completions")}, {"model", Value(request.model)}});
    return out;
}

}  // namespace omnirt::serve::openai
