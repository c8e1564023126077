#pragma once
// A realtime session's conversation: its items (messages with text, audio and image parts) in
// order, their protocol shapes, and the chat messages a response runs the pipeline on.
//
// Thread safety: plain values; the session serialises access.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serve/openai/chat_request.h"
#include "serve/openai/limits.h"
#include "serve/openai/protocol_error.h"

namespace omnirt::serve::realtime {

enum class PartType : std::uint8_t {
    input_text,
    input_audio,
    input_image,
    output_text,
    output_audio
};

struct Part {
    PartType type = PartType::input_text;
    std::string text;                 // input_text, output_text
    std::string transcript;           // input_audio (client-given), output_audio
    std::vector<std::int16_t> audio;  // input_audio, output_audio: pcm16 mono 24 kHz
    std::string image_url;            // input_image: a data URL
    std::string detail;               // input_image
};

struct Item {
    std::string id;
    std::string role;                  // user, assistant, system
    std::string status = "completed";  // completed, incomplete, in_progress
    std::vector<Part> content;
};

struct ItemLimits {
    openai::RequestLimits request;
    openai::MediaPolicy media;
};

// conversation.item.create's `item` (only type "message"). `param` is "item". The id is the
// client's, or empty for the session to assign.
[[nodiscard]] openai::ProtocolResult<Item> parse_item(const nlohmann::json& item,
                                                      const std::string& param,
                                                      const ItemLimits& limits);

// The protocol shape of an item; audio bytes only when `with_audio` (conversation.item.retrieve).
[[nodiscard]] nlohmann::json item_json(const Item& item, bool beta, bool with_audio);
[[nodiscard]] nlohmann::json part_json(const Part& part, bool beta, bool with_audio);

// The chat messages a response runs on: `instructions` as a system message, then every item
// with content the model can read (assistant audio as its transcript). Images are resolved
// (data URLs only) here; an item that cannot be is a 400 naming it.
[[nodiscard]] openai::ProtocolResult<std::vector<openai::ChatMessage>> chat_messages(
    const std::string& instructions, const std::vector<Item>& items, const ItemLimits& limits);

// Ordered items with lookup by id.
class Conversation {
  public:
    // Inserts after `previous_item_id` ("" or absent: at the end; "root": first). not_found
    // (as a ProtocolError naming `param`) for an unknown previous id; a duplicate id is refused.
    // Returns the id of the item before it ("" when first).
    [[nodiscard]] openai::ProtocolResult<std::string> insert(
        Item item, const std::optional<std::string>& previous_item_id, const std::string& param);
    [[nodiscard]] Item* find(const std::string& id);
    bool erase(const std::string& id);
    [[nodiscard]] const std::vector<Item>& items() const { return items_; }
    [[nodiscard]] std::string last_id() const { return items_.empty() ? "" : items_.back().id; }

  private:
    std::vector<Item> items_;
};

// pcm16 little-endian bytes <-> samples.
[[nodiscard]] std::vector<std::int16_t> pcm16_samples(const std::vector<std::uint8_t>& bytes);
[[nodiscard]] std::string base64_pcm16(const std::vector<std::int16_t>& samples);
[[nodiscard]] std::int64_t audio_ms(std::size_t samples);

}  // namespace omnirt::serve::realtime
