#pragma once
// Internal to the chat decoder: `messages` -> ChatMessage list (see chat_request.h).
#include <nlohmann/json.hpp>
#include <vector>

#include "serve/openai/chat_request.h"

namespace omnirt::serve::openai {

[[nodiscard]] ProtocolResult<std::vector<ChatMessage>> parse_messages(const nlohmann::json& body,
                                                                      const RequestLimits& limits,
                                                                      const MediaPolicy& media);

}  // namespace omnirt::serve::openai
