// Session: conversation.item.create / retrieve / truncate / delete.
#include <cctype>

#include "serve/realtime/session_response.h"

namespace omnirt::serve::realtime {
using nlohmann::json;
using openai::ProtocolError;

namespace {

ProtocolError item_error(std::string code, std::string message, std::string param) {
    return ProtocolError{400, std::move(message), "invalid_request_error", std::move(param),
                         std::move(code)};
}

// The prefix of `text` that was spoken in the first `fraction` of its audio, cut at a word
// boundary (an estimate: the pipeline gives no word timings).
std::string spoken_prefix(const std::string& text, double fraction) {
    if (fraction >= 1.0) return text;
    std::size_t cut = static_cast<std::size_t>(static_cast<double>(text.size()) * fraction);
    while (cut > 0 && cut < text.size() && !std::isspace(static_cast<unsigned char>(text[cut]))) {
        --cut;
    }
    // Never split a UTF-8 sequence.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    std::string prefix = text.substr(0, cut);
    while (!prefix.empty() && std::isspace(static_cast<unsigned char>(prefix.back()))) {
        prefix.pop_back();
    }
    return prefix;
}

}  // namespace

std::optional<std::string> Session::existing_item_id(const json& event,
                                                     const std::string& event_id) {
    auto id = event.find("item_id");
    if (id == event.end() || !id->is_string()) {
        error(item_error("item_not_found", "needs 'item_id'", "item_id"), event_id);
        return std::nullopt;
    }
    if (conversation_.find(id->get<std::string>()) == nullptr) {
        error(item_error("item_not_found", "no item with id '" + id->get<std::string>() + "'",
                         "item_id"),
              event_id);
        return std::nullopt;
    }
    return id->get<std::string>();
}

void Session::add_item(Item item, const std::optional<std::string>& previous_item_id) {
    auto previous = conversation_.insert(item, previous_item_id, "previous_item_id");
    if (!previous) return;  // callers checked
    emit({{"type", name("conversation.item.added")},
          {"previous_item_id", previous->empty() ? json(nullptr) : json(*previous)},
          {"item", item_json(item, options_.beta, false)}});
    if (!options_.beta && item.status != "in_progress") {
        emit({{"type", "conversation.item.done"}, {"item", item_json(item, options_.beta, false)}});
    }
}

void Session::create_item(const json& event, const std::string& event_id) {
    auto value = event.find("item");
    if (value == event.end()) {
        error(item_error("missing_required_parameter", "conversation.item.create needs 'item'",
                         "item"),
              event_id);
        return;
    }
    auto item = parse_item(*value, "item", options_.limits);
    if (!item) {
        ProtocolError e = item.error();
        if (e.code.empty()) e.code = "invalid_value";
        error(e, event_id);
        return;
    }
    if (item->id.empty()) item->id = next_id("item_");
    if (conversation_.find(item->id) != nullptr) {
        error(item_error("item_already_exists", "an item with id '" + item->id + "' exists",
                         "item.id"),
              event_id);
        return;
    }
    std::optional<std::string> previous;
    if (auto p = event.find("previous_item_id"); p != event.end() && !p->is_null()) {
        if (!p->is_string()) {
            error(item_error("invalid_value", "must be a string", "previous_item_id"), event_id);
            return;
        }
        previous = p->get<std::string>();
        if (*previous != "root" && conversation_.find(*previous) == nullptr) {
            error(item_error("item_not_found", "no item with id '" + *previous + "'",
                             "previous_item_id"),
                  event_id);
            return;
        }
    }
    if (conversation_.items().size() >= options_.max_items) {
        error(item_error("conversation_full",
                         "the conversation holds at most " + std::to_string(options_.max_items) +
                             " items; delete some",
                         "item"),
              event_id);
        return;
    }
    add_item(std::move(*item), previous);
}

void Session::retrieve_item(const json& event, const std::string& event_id) {
    auto id = existing_item_id(event, event_id);
    if (!id) return;
    const Item* item = conversation_.find(*id);
    emit(
        {{"type", "conversation.item.retrieved"}, {"item", item_json(*item, options_.beta, true)}});
}

void Session::truncate_item(const json& event, const std::string& event_id) {
    auto id = existing_item_id(event, event_id);
    if (!id) return;
    const std::string item_id = *id;
    auto index = event.find("content_index");
    auto end_ms = event.find("audio_end_ms");
    if (index == event.end() || !index->is_number_integer() || end_ms == event.end() ||
        !end_ms->is_number_integer() || end_ms->get<std::int64_t>() < 0) {
        error(item_error("invalid_value",
                         "needs an integer content_index and a non-negative audio_end_ms",
                         index == event.end() || !index->is_number_integer() ? "content_index"
                                                                             : "audio_end_ms"),
              event_id);
        return;
    }
    // The client stopped playing the answer in progress: it ends here.
    if (response_ && response_->item_id == item_id) cancel_response("client_cancelled");
    Item* item = conversation_.find(item_id);
    const auto content_index = index->get<std::int64_t>();
    if (item == nullptr || item->role != "assistant" || content_index < 0 ||
        content_index >= static_cast<std::int64_t>(item->content.size()) ||
        item->content[static_cast<std::size_t>(content_index)].type != PartType::output_audio) {
        error(
            item_error("invalid_value", "only the audio part of an assistant item can be truncated",
                       "content_index"),
            event_id);
        return;
    }
    Part& part = item->content[static_cast<std::size_t>(content_index)];
    const std::int64_t played_ms = end_ms->get<std::int64_t>();
    const std::int64_t total_ms = audio_ms(part.audio.size());
    if (played_ms > total_ms) {
        error(item_error("invalid_value",
                         "audio_end_ms " + std::to_string(played_ms) + " is beyond the item's " +
                             std::to_string(total_ms) + " ms of audio",
                         "audio_end_ms"),
              event_id);
        return;
    }
    const auto keep = static_cast<std::size_t>(played_ms * (kAudioRate / 1000));
    part.transcript = spoken_prefix(
        part.transcript,
        total_ms > 0 ? static_cast<double>(played_ms) / static_cast<double>(total_ms) : 1.0);
    part.audio.resize(std::min(keep, part.audio.size()));
    emit({{"type", "conversation.item.truncated"},
          {"item_id", item_id},
          {"content_index", content_index},
          {"audio_end_ms", played_ms}});
}

void Session::delete_item(const json& event, const std::string& event_id) {
    auto id = existing_item_id(event, event_id);
    if (!id) return;
    const std::string item_id = *id;
    if (response_ && response_->item_id == item_id) cancel_response("client_cancelled");
    conversation_.erase(item_id);
    emit({{"type", "conversation.item.deleted"}, {"item_id", item_id}});
}

}  // namespace omnirt::serve::realtime
