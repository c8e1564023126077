#include "serve/openai/tokenize_request.h"

#include "serve/openai/chat_messages.h"
#include "serve/openai/json_body.h"

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::json;

// The first of `names` present (an alias pair such as prompt / content); both present is an error.
ProtocolResult<const char*> pick(const Json& body, const char* name, const char* alias) {
    const auto has = [&](const char* key) {
        const auto it = body.find(key);
        return it != body.end() && !it->is_null();
    };
    if (has(name) && has(alias)) {
        return invalid_request(name,
                               std::string("send '") + name + "' or '" + alias + "', not both");
    }
    return has(alias) ? alias : name;
}

ProtocolResult<std::string> read_model(const Json& body) {
    OMNI_TRY_P(auto model, read_string(body, "model", "", 256));
    return model.value_or("");
}

}  // namespace

ProtocolResult<TokenizeRequest> parse_tokenize_request(std::string_view body,
                                                       const RequestLimits& limits) {
    OMNI_TRY_P(const Json json, parse_body(body, limits));
    TokenizeRequest out;
    OMNI_TRY_P(out.model, read_model(json));
    OMNI_TRY_P(const char* prompt_key, pick(json, "prompt", "content"));
    OMNI_TRY_P(out.prompt, read_string(json, prompt_key, "", limits.max_string_bytes));
    const auto messages = json.find("messages");
    const bool has_messages = messages != json.end() && !messages->is_null();
    if (out.prompt && has_messages) {
        return invalid_request("messages", "send 'prompt' or 'messages', not both");
    }
    if (!out.prompt && !has_messages) {
        return invalid_request("prompt", "'prompt' (a string) or 'messages' is required");
    }
    if (has_messages) {
        // Media parts are not fetched or decoded here: no local or remote media is allowed.
        OMNI_TRY_P(out.messages, parse_messages(json, limits, MediaPolicy{}));
    }
    OMNI_TRY_P(auto generation, read_bool(json, "add_generation_prompt", ""));
    out.add_generation_prompt = generation.value_or(true);
    OMNI_TRY_P(const char* special_key, pick(json, "add_special_tokens", "add_special"));
    OMNI_TRY_P(auto special, read_bool(json, special_key, ""));
    out.add_special_tokens = special.value_or(true);
    OMNI_TRY_P(const char* strs_key, pick(json, "return_token_strs", "with_pieces"));
    OMNI_TRY_P(auto strs, read_bool(json, strs_key, ""));
    out.return_token_strs = strs.value_or(false);
    return out;
}

ProtocolResult<DetokenizeRequest> parse_detokenize_request(std::string_view body,
                                                           const RequestLimits& limits) {
    OMNI_TRY_P(const Json json, parse_body(body, limits));
    DetokenizeRequest out;
    OMNI_TRY_P(out.model, read_model(json));
    const auto tokens = json.find("tokens");
    if (tokens == json.end() || tokens->is_null()) {
        return invalid_request("tokens", "'tokens' (an array of token ids) is required");
    }
    if (!tokens->is_array()) {
        return invalid_request("tokens", "'tokens' must be an array of token ids, not " +
                                             std::string(json_type_name(*tokens)));
    }
    out.tokens.reserve(tokens->size());
    for (std::size_t i = 0; i < tokens->size(); ++i) {
        const Json& id = (*tokens)[i];
        const bool ok = is_token_id(id);
        if (!ok) {
            const std::string path = index_path("tokens", i);
            return invalid_request(path, "'" + path + "' must be a token id (an integer >= 0)");
        }
        out.tokens.push_back(id.get<std::int64_t>());
    }
    return out;
}

}  // namespace omnirt::serve::openai
