// Session: event dispatch, errors, session.update, and the input audio buffer with server VAD.
#include "serve/realtime/realtime_session.h"

#include "serve/openai/base64.h"
#include "serve/realtime/session_response.h"

namespace omnirt::serve::realtime {
using nlohmann::json;
using openai::ProtocolError;

namespace {

constexpr std::size_t kSamplesPerMs = kAudioRate / 1000;
constexpr std::size_t kMinCommitSamples = 100 * kSamplesPerMs;  // 100 ms, as the protocol asks

ProtocolError event_error(std::string code, std::string message, std::string param = {}) {
    return ProtocolError{400, std::move(message), "invalid_request_error", std::move(param),
                         std::move(code)};
}

}  // namespace

Session::Session(SessionOptions options, ResponseBackend& backend, Send send)
    : options_(std::move(options)), backend_(backend), send_(std::move(send)) {
    options_.choices.server_vad = static_cast<bool>(options_.vad);
    options_.choices.limits = options_.limits.request;
    config_.id = next_id("sess_");
    config_.model = options_.model_name;
    if (options_.choices.server_vad) config_.turn_detection = TurnDetection{};
}

Session::~Session() = default;

std::string Session::next_id(std::string_view prefix) {
    return std::string(prefix) + options_.id_seed + std::to_string(++counter_);
}

std::string Session::name(std::string_view ga) const {
    if (!options_.beta) return std::string(ga);
    static const std::pair<std::string_view, std::string_view> kBeta[] = {
        {"response.output_text.delta", "response.text.delta"},
        {"response.output_text.done", "response.text.done"},
        {"response.output_audio.delta", "response.audio.delta"},
        {"response.output_audio.done", "response.audio.done"},
        {"response.output_audio_transcript.delta", "response.audio_transcript.delta"},
        {"response.output_audio_transcript.done", "response.audio_transcript.done"},
        {"conversation.item.added", "conversation.item.created"},
    };
    for (const auto& [from, to] : kBeta) {
        if (ga == from) return std::string(to);
    }
    return std::string(ga);
}

void Session::emit(json event) {
    if (closed_) return;
    event["event_id"] = next_id("event_");
    send_(event.dump(-1, ' ', false, json::error_handler_t::replace));
}

void Session::error(const ProtocolError& error, const std::string& event_id) {
    emit({{"type", "error"},
          {"error",
           {{"type", error.type},
            {"code", error.code.empty() ? "invalid_value" : error.code},
            {"message", error.message},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)},
            {"event_id", event_id.empty() ? json(nullptr) : json(event_id)}}}});
}

void Session::open() {
    std::lock_guard lock(mutex_);
    if (options_.choices.server_vad) {
        auto vad = options_.vad(*config_.turn_detection, kAudioRate);
        if (vad) {
            vad_ = std::move(*vad);
        } else {
            config_.turn_detection.reset();
            options_.choices.server_vad = false;
        }
    }
    emit({{"type", "session.created"}, {"session", session_json(config_, options_.beta)}});
}

void Session::on_binary() {
    std::lock_guard lock(mutex_);
    error(event_error("invalid_event",
                      "binary messages are not part of the protocol; send JSON "
                      "text events"),
          "");
}

void Session::on_message(std::string_view text) {
    std::vector<BackendCall> calls;
    {
        std::lock_guard lock(mutex_);
        handle_message(text);
        calls.swap(backend_calls_);
    }
    run_backend_calls(std::move(calls));
}

void Session::run_backend_calls(std::vector<BackendCall> calls) {
    for (auto& call : calls) {
        if (!call.request) {
            backend_.cancel(call.id, call.reason);
            continue;
        }
        Status started = backend_.start(call.id, *call.request, std::move(call.events));
        if (started) continue;
        std::lock_guard lock(mutex_);
        if (!response_ || response_->id != call.id) continue;
        finish_response("failed",
                        {{"type", "failed"},
                         {"error",
                          {{"type", "server_error"},
                           {"code", to_string(started.error().code)},
                           {"message", started.error().message}}}},
                        {});
    }
}

void Session::handle_message(std::string_view text) {
    json event = json::parse(text, nullptr, false);
    if (closed_) return;
    if (event.is_discarded()) {
        error(event_error("invalid_json", "the message is not valid JSON"), "");
        return;
    }
    if (!event.is_object()) {
        error(event_error("invalid_event", "an event must be a JSON object"), "");
        return;
    }
    std::string event_id;
    if (auto id = event.find("event_id"); id != event.end() && id->is_string()) {
        event_id = id->get<std::string>();
    }
    try {
        dispatch(event, event_id);
    } catch (const json::exception& e) {
        // A field of an unexpected JSON type that a handler read directly.
        error(event_error("invalid_event", std::string("malformed event: ") + e.what()), event_id);
    }
}

void Session::dispatch(const json& event, const std::string& event_id) {
    auto type = event.find("type");
    if (type == event.end() || !type->is_string()) {
        error(event_error("invalid_event", "the event has no string 'type'", "type"), event_id);
        return;
    }
    const std::string& name = type->get_ref<const std::string&>();
    if (name == "session.update") {
        update_session(event, event_id);
    } else if (name == "input_audio_buffer.append") {
        append_audio(event, event_id);
    } else if (name == "input_audio_buffer.commit") {
        commit_audio(buffer_.size(), event_id);
    } else if (name == "input_audio_buffer.clear") {
        clear_audio();
        emit({{"type", "input_audio_buffer.cleared"}});
    } else if (name == "conversation.item.create") {
        create_item(event, event_id);
    } else if (name == "conversation.item.retrieve") {
        retrieve_item(event, event_id);
    } else if (name == "conversation.item.truncate") {
        truncate_item(event, event_id);
    } else if (name == "conversation.item.delete") {
        delete_item(event, event_id);
    } else if (name == "response.create") {
        auto params = event.find("response");
        create_response(params == event.end() ? json::object() : *params, event_id);
    } else if (name == "response.cancel") {
        if (!response_) {
            error(event_error("response_cancel_not_active", "there is no response in progress"),
                  event_id);
            return;
        }
        if (auto id = event.find("response_id");
            id != event.end() && id->is_string() && *id != response_->id) {
            error(event_error("response_cancel_not_active",
                              "response '" + id->get<std::string>() + "' is not in progress",
                              "response_id"),
                  event_id);
            return;
        }
        cancel_response("client_cancelled");
    } else {
        error(event_error("invalid_event", "unknown event type '" + name + "'", "type"), event_id);
    }
}

void Session::update_session(const json& event, const std::string& event_id) {
    auto session = event.find("session");
    if (session == event.end()) {
        error(
            event_error("missing_required_parameter", "session.update needs 'session'", "session"),
            event_id);
        return;
    }
    const auto before = config_.turn_detection;
    if (auto applied = apply_session_update(config_, *session, options_.choices); !applied) {
        ProtocolError e = applied.error();
        if (e.code.empty()) e.code = "invalid_value";
        error(e, event_id);
        return;
    }
    if (config_.turn_detection != before) {
        vad_.reset();
        speech_.reset();
        if (config_.turn_detection) {
            auto vad = options_.vad(*config_.turn_detection, kAudioRate);
            if (!vad) {
                config_.turn_detection = before;
                error(ProtocolError{500, vad.error().message, "server_error",
                                    "session.audio.input.turn_detection", "vad_unavailable"},
                      event_id);
                return;
            }
            vad_ = std::move(*vad);
            vad_origin_ = buffer_start_ + static_cast<std::int64_t>(buffer_.size());
        }
    }
    emit({{"type", "session.updated"}, {"session", session_json(config_, options_.beta)}});
}

void Session::append_audio(const json& event, const std::string& event_id) {
    auto audio = event.find("audio");
    if (audio == event.end() || !audio->is_string()) {
        error(event_error("missing_required_parameter", "append needs 'audio' (base64 pcm16)",
                          "audio"),
              event_id);
        return;
    }
    auto bytes = openai::base64_decode(audio->get_ref<const std::string&>());
    if (!bytes) {
        error(event_error("invalid_value", "'audio' is not valid base64", "audio"), event_id);
        return;
    }
    if (bytes->size() % 2 != 0) {
        error(event_error("invalid_value",
                          "'audio' must be pcm16 (an even number of bytes, 24 kHz mono)", "audio"),
              event_id);
        return;
    }
    if ((buffer_.size() * 2) + bytes->size() > options_.max_buffer_bytes) {
        error(event_error("input_audio_buffer_full",
                          "the input audio buffer holds at most " +
                              std::to_string(options_.max_buffer_bytes) +
                              " bytes; commit or clear it",
                          "audio"),
              event_id);
        return;
    }
    auto samples = pcm16_samples(*bytes);
    buffer_.insert(buffer_.end(), samples.begin(), samples.end());
    if (vad_) detect_voice(samples);
}

void Session::detect_voice(std::span<const std::int16_t> pcm) {
    const TurnDetection& detection = *config_.turn_detection;
    for (const VoiceEvent& voice : vad_->feed(pcm)) {
        const std::int64_t at =
            vad_origin_ + voice.audio_ms * static_cast<std::int64_t>(kSamplesPerMs);
        if (voice.started) {
            speech_ = std::max(at, buffer_start_);
            speech_item_id_ = next_id("item_");
            emit({{"type", "input_audio_buffer.speech_started"},
                  {"audio_start_ms",
                   voice.audio_ms + vad_origin_ / static_cast<std::int64_t>(kSamplesPerMs)},
                  {"item_id", speech_item_id_}});
            if (response_ && detection.interrupt_response) cancel_response("turn_detected");
            continue;
        }
        if (!speech_) continue;
        emit({{"type", "input_audio_buffer.speech_stopped"},
              {"audio_end_ms",
               voice.audio_ms + vad_origin_ / static_cast<std::int64_t>(kSamplesPerMs)},
              {"item_id", speech_item_id_}});
        // The turn: from prefix_padding_ms before the start of speech to its end.
        const std::int64_t first =
            std::max(buffer_start_, *speech_ - detection.prefix_padding_ms *
                                                   static_cast<std::int64_t>(kSamplesPerMs));
        const std::int64_t end = std::clamp<std::int64_t>(
            at, first, buffer_start_ + static_cast<std::int64_t>(buffer_.size()));
        buffer_.erase(buffer_.begin(), buffer_.begin() + (first - buffer_start_));
        buffer_start_ = first;
        speech_.reset();
        commit_audio(static_cast<std::size_t>(end - first), "");
        if (detection.create_response && !response_) create_response(json::object(), "");
    }
    trim_idle_audio();
}

void Session::trim_idle_audio() {
    // Outside speech only the prefix padding can still become part of a turn.
    if (speech_ || !config_.turn_detection) return;
    const std::size_t keep =
        static_cast<std::size_t>(config_.turn_detection->prefix_padding_ms) * kSamplesPerMs +
        kMinCommitSamples;
    if (buffer_.size() <= 2 * keep) return;
    const std::size_t drop = buffer_.size() - keep;
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(drop));
    buffer_start_ += static_cast<std::int64_t>(drop);
}

void Session::commit_audio(std::size_t end_sample, const std::string& event_id) {
    if (end_sample < kMinCommitSamples) {
        error(event_error("input_audio_buffer_commit_empty",
                          "the input audio buffer holds " + std::to_string(audio_ms(end_sample)) +
                              " ms; a commit needs at least 100 ms"),
              event_id);
        return;
    }
    Item item;
    item.id = speech_item_id_.empty() ? next_id("item_") : speech_item_id_;
    speech_item_id_.clear();
    item.role = "user";
    Part part;
    part.type = PartType::input_audio;
    part.audio.assign(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(end_sample));
    item.content.push_back(std::move(part));
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(end_sample));
    buffer_start_ += static_cast<std::int64_t>(end_sample);
    if (conversation_.items().size() >= options_.max_items) {
        error(event_error("conversation_full", "the conversation holds at most " +
                                                   std::to_string(options_.max_items) +
                                                   " items; delete some"),
              event_id);
        return;
    }
    const std::string previous = conversation_.last_id();
    emit({{"type", "input_audio_buffer.committed"},
          {"previous_item_id", previous.empty() ? json(nullptr) : json(previous)},
          {"item_id", item.id}});
    add_item(std::move(item), std::nullopt);
}

void Session::clear_audio() {
    buffer_start_ += static_cast<std::int64_t>(buffer_.size());
    buffer_.clear();
    speech_.reset();
    speech_item_id_.clear();
    if (vad_) vad_->reset();
}

void Session::close() {
    std::vector<BackendCall> calls;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;  // nobody to tell: the cancellation below sends nothing
        if (response_) cancel_response("client_disconnected");
        calls.swap(backend_calls_);
    }
    run_backend_calls(std::move(calls));
}

Session::Stats Session::stats() const {
    std::lock_guard lock(mutex_);
    Stats stats = stats_;
    stats.responding = response_ != nullptr;
    return stats;
}

}  // namespace omnirt::serve::realtime
