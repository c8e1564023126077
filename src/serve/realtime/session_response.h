#pragma once
// Internal to the session: the response in progress.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serve/realtime/realtime_session.h"

namespace omnirt::serve::realtime {

struct Session::Response {
    std::string id;
    std::string item_id;
    bool in_conversation = true;  // response.conversation "auto" (else "none": out of band)
    std::vector<std::string> modalities;
    std::string voice;
    std::optional<std::int64_t> max_output_tokens;
    nlohmann::json metadata;  // echoed in response.done
    bool item_started = false;
    std::string text;                 // the transcript (audio) or the text
    std::vector<std::int16_t> audio;  // pcm16 at 24 kHz, as sent

    [[nodiscard]] bool audio_out() const {
        for (const auto& modality : modalities) {
            if (modality == "audio") return true;
        }
        return false;
    }
};

}  // namespace omnirt::serve::realtime
