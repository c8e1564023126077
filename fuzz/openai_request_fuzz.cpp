// Fuzzes the OpenAI request decoders (chat completions and audio speech) and the strict base64
// decoder. Every input must either decode or produce a 400/413 ProtocolError whose error object
// serialises to valid JSON; a decoded request must map onto an OmniRequest; base64 that decodes
// must re-encode to the same text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "serve/openai/base64.h"
#include "serve/openai/chat_request.h"
#include "serve/openai/responses.h"
#include "serve/openai/speech_request.h"

namespace {

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "openai_request_fuzz: %s\n", what);
    std::abort();
}

void check_error(const omnirt::serve::openai::ProtocolError& error) {
    if (error.http_status != 400 && error.http_status != 413) die("unexpected status");
    if (error.message.empty()) die("an error without a message");
    const auto json = nlohmann::json::parse(omnirt::serve::openai::error_json(error), nullptr,
                                            /*allow_exceptions=*/false);
    if (json.is_discarded()) die("error_json is not JSON");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace omnirt::serve::openai;
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    RequestLimits limits;
    limits.max_body_bytes = 1 << 20;
    limits.max_media_bytes = 1 << 16;
    MediaPolicy media;
    media.allow_remote = size > 0 && (data[0] & 1) != 0;  // never local paths: no file IO here

    auto chat = parse_chat_request(body, limits, media);
    if (chat.has_value()) {
        const auto omni = to_omni_request(*chat);
        if (!omni.inputs.is_map() || !omni.params.is_map()) die("chat mapping is not a map");
        if (chat->messages.empty()) die("a chat request without messages");
    } else {
        check_error(chat.error());
    }
    auto speech = parse_speech_request(body, limits);
    if (speech.has_value()) {
        const auto omni = to_omni_request(*speech);
        if (speech->input.empty()) die("a speech request without input");
        if (!omni.inputs.is_map()) die("speech mapping is not a map");
    } else {
        check_error(speech.error());
    }
    auto decoded = base64_decode(body);
    if (decoded.has_value() && base64_encode(*decoded) != body) die("base64 is not canonical");
    return 0;
}
