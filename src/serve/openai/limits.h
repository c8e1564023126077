#pragma once
// Bounds on what a request body may hold, and where media may come from. The server fills these
// from its configuration; the defaults suit a public endpoint.
//
// Thread safety: plain values.
#include <cstddef>
#include <cstdint>
#include <string>

namespace omnirt::serve::openai {

struct RequestLimits {
    std::size_t max_body_bytes = 64u << 20;     // whole JSON body (data URLs included)
    int max_depth = 32;                         // JSON nesting (arrays and objects)
    std::size_t max_json_values = 1u << 20;     // JSON values in the body (bounds parser memory)
    std::size_t max_messages = 1024;            // chat messages
    std::size_t max_parts = 256;                // content parts per message
    std::size_t max_string_bytes = 1u << 20;    // any string that is not a media payload
    std::size_t max_media_bytes = 48u << 20;    // one decoded media payload
    std::size_t max_stop_sequences = 16;        // entries of `stop`
    std::size_t max_stages = 64;                // entries of stage_sampling / stage_params
    std::int64_t max_tokens = 1 << 20;          // max_tokens / max_completion_tokens ceiling
    std::size_t max_speech_input_chars = 4096;  // `input` of /v1/audio/speech (code points)
};

struct MediaPolicy {
    // Local paths and file:// URLs are accepted only when this names a directory, and only for
    // files that resolve (realpath, symlinks followed) to a regular file inside it.
    std::string allowed_local_dir;
    // http(s) URLs: rejected with a 400 unless true; then passed on as MediaInput::remote_url
    // (this layer never fetches).
    bool allow_remote = false;
};

}  // namespace omnirt::serve::openai
