#pragma once
// POST /tokenize and POST /detokenize bodies (the vLLM shape; llama-server's field names are
// accepted too). Pure decoding and validation; the server does the tokenizing.
//
//   /tokenize   {"model"?, "prompt": str} or {"model"?, "messages": [...],
//               "add_generation_prompt"?: bool = true}; "add_special_tokens"?: bool = true,
//               "return_token_strs"?: bool = false. llama-server: "content" for "prompt",
//               "add_special" for "add_special_tokens", "with_pieces" for "return_token_strs".
//   /detokenize {"model"?, "tokens": [int...]}
//
// Thread safety: pure functions.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/openai/chat_request.h"
#include "serve/openai/limits.h"
#include "serve/openai/protocol_error.h"

namespace omnirt::serve::openai {

struct TokenizeRequest {
    std::string model;
    std::optional<std::string> prompt;  // exactly one of prompt and messages
    std::vector<ChatMessage> messages;
    bool add_generation_prompt = true;
    bool add_special_tokens = true;
    bool return_token_strs = false;
};

struct DetokenizeRequest {
    std::string model;
    std::vector<std::int64_t> tokens;
};

[[nodiscard]] ProtocolResult<TokenizeRequest> parse_tokenize_request(std::string_view body,
                                                                     const RequestLimits& limits);
[[nodiscard]] ProtocolResult<DetokenizeRequest> parse_detokenize_request(
    std::string_view body, const RequestLimits& limits);

}  // namespace omnirt::serve::openai
