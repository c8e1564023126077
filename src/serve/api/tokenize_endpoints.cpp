// POST /tokenize and POST /detokenize over the served model's tokenizer (vLLM's shape):
//   /tokenize   -> {"count", "max_model_len", "tokens": [ids], "token_strs": [str] | null}
//   /detokenize -> {"prompt": text}
// Chat messages are rendered with the served model's chat template (ApiServerOptions::
// render_chat, the model family's).
#include <nlohmann/json.hpp>

#include "serve/api/api_internal.h"
#include "serve/openai/chat_request.h"
#include "serve/openai/tokenize_request.h"
#include "text/tokenizer.h"

namespace omnirt::serve::api {
namespace {

using json = nlohmann::json;

std::string dump(const json& body) {
    return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The exchange's tokenizer, or a 404 answered (this pipeline has none) and null.
const text::Tokenizer* tokenizer_or_404(Exchange& exchange, const char* path) {
    const auto& tokenizer = exchange.state().options.tokenizer;
    if (tokenizer) return tokenizer.get();
    exchange.respond_error({404,
                            std::string(path) +
                                " needs the model's tokenizer; this server has none (the "
                                "pipeline's model_path has no tokenizer.json)",
                            "invalid_request_error", "", "not_found"});
    return nullptr;
}

openai::ProtocolError bad_request(const Error& error, const char* param) {
    return {400, error.message, "invalid_request_error", param, ""};
}

void tokenize(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    Exchange exchange(state, std::move(http), "/tokenize");
    auto request = accept_request(exchange, [&](std::string_view body) {
        return openai::parse_tokenize_request(body, state.options.limits);
    });
    if (!request) return;
    const text::Tokenizer* tokenizer = tokenizer_or_404(exchange, "/tokenize");
    if (tokenizer == nullptr) return;
    std::string prompt;
    if (request->prompt) {
        prompt = std::move(*request->prompt);
    } else {
        const auto& render_chat = state.options.render_chat;
        if (!render_chat) {
            exchange.respond_error({400,
                                    "/tokenize of chat messages needs the model's chat template; "
                                    "this server has none: send a prompt",
                                    "invalid_request_error", "messages", ""});
            return;
        }
        openai::ChatRequest chat;
        chat.messages = std::move(request->messages);
        const OmniRequest omni = openai::to_omni_request(chat);
        auto rendered =
            render_chat(*omni.inputs.find("messages"), request->add_generation_prompt, "/tokenize");
        if (!rendered) {
            exchange.respond_error(bad_request(rendered.error(), "messages"));
            return;
        }
        prompt = std::move(*rendered);
    }
    auto ids = tokenizer->encode(
        prompt, text::EncodeOptions{.add_special_tokens = request->add_special_tokens});
    if (!ids) {
        exchange.respond_error(bad_request(ids.error(), request->prompt ? "prompt" : "messages"));
        return;
    }
    json body = {{"count", ids->size()},
                 {"max_model_len", state.options.max_model_len},
                 {"tokens", *ids},
                 {"token_strs", nullptr}};
    if (request->return_token_strs) {
        json strs = json::array();
        for (text::TokenId id : *ids)
            strs.push_back(std::string(tokenizer->id_to_token(id).value_or("")));
        body["token_strs"] = std::move(strs);
    }
    exchange.respond_json(200, dump(body));
}

void detokenize(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    Exchange exchange(state, std::move(http), "/detokenize");
    auto request = accept_request(exchange, [&](std::string_view body) {
        return openai::parse_detokenize_request(body, state.options.limits);
    });
    if (!request) return;
    const text::Tokenizer* tokenizer = tokenizer_or_404(exchange, "/detokenize");
    if (tokenizer == nullptr) return;
    std::vector<text::TokenId> ids;
    ids.reserve(request->tokens.size());
    for (std::size_t i = 0; i < request->tokens.size(); ++i) {
        const std::int64_t id = request->tokens[i];
        if (id >= static_cast<std::int64_t>(tokenizer->vocab_size()) ||
            !tokenizer->id_to_token(static_cast<text::TokenId>(id))) {
            const std::string path = "tokens[" + std::to_string(i) + "]";
            exchange.respond_error({400,
                                    "'" + path + "' (" + std::to_string(id) +
                                        ") is not a token of this model's vocabulary",
                                    "invalid_request_error", path, ""});
            return;
        }
        ids.push_back(static_cast<text::TokenId>(id));
    }
    auto text = tokenizer->decode(ids);
    if (!text) {
        exchange.respond_error(bad_request(text.error(), "tokens"));
        return;
    }
    exchange.respond_json(200, dump(json{{"prompt", *text}}));
}

}  // namespace

Status add_tokenize_routes(ApiState& state) {
    ApiState* s = &state;
    OMNI_RETURN_IF_ERROR(state.http->add_route("POST", "/tokenize",
                                               [s](auto http) { tokenize(*s, std::move(http)); }));
    return state.http->add_route("POST", "/detokenize",
                                 [s](auto http) { detokenize(*s, std::move(http)); });
}

}  // namespace omnirt::serve::api
