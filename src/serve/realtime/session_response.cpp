// Session: responses (response.create / cancel, the pipeline's deltas, response.done).
#include "serve/realtime/session_response.h"

#include <algorithm>
#include <cmath>

#include "media/audio.h"

namespace omnirt::serve::realtime {
using nlohmann::json;
using openai::ProtocolError;

namespace {

ProtocolError param_error(std::string message, std::string param) {
    return ProtocolError{400, std::move(message), "invalid_request_error", std::move(param),
                         "invalid_value"};
}

// pcm16 mono at 24 kHz, whatever the stage produced.
Result<std::vector<std::int16_t>> to_pcm16(const media::AudioBuffer& audio) {
    media::AudioBuffer mono{.sample_rate = audio.sample_rate, .channels = 1, .samples = {}};
    const auto frames = static_cast<std::size_t>(audio.frames());
    mono.samples.resize(frames);
    for (std::size_t f = 0; f < frames; ++f) {
        float sum = 0;
        for (int c = 0; c < audio.channels; ++c) {
            sum += audio.samples[f * static_cast<std::size_t>(audio.channels) +
                                 static_cast<std::size_t>(c)];
        }
        mono.samples[f] = sum / static_cast<float>(audio.channels);
    }
    if (mono.sample_rate != kAudioRate) {
        OMNI_TRY(mono, media::resample(mono, kAudioRate));
    }
    std::vector<std::int16_t> out(mono.samples.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
        float s = std::isnan(mono.samples[i]) ? 0.0f : std::clamp(mono.samples[i], -1.0f, 1.0f);
        out[i] = static_cast<std::int16_t>(std::lround(s * 32767.0f));
    }
    return out;
}

}  // namespace

void Session::create_response(const json& params, const std::string& event_id) {
    if (response_) {
        error(
            ProtocolError{400, "a response is already in progress (" + response_->id + ")",
                          "invalid_request_error", "", "conversation_already_has_active_response"},
            event_id);
        return;
    }
    if (!params.is_object()) {
        error(param_error("must be an object", "response"), event_id);
        return;
    }
    auto response = std::make_unique<Response>();
    response->modalities = config_.output_modalities;
    response->voice = config_.voice;
    response->max_output_tokens = config_.max_output_tokens;
    std::string instructions = config_.instructions;
    std::optional<double> temperature = config_.temperature;
    auto get = [&](const char* name) -> const json* {
        auto it = params.find(name);
        return it == params.end() || it->is_null() ? nullptr : &*it;
    };
    for (const char* name : {"output_modalities", "modalities"}) {
        if (const json* v = get(name)) {
            auto modalities = parse_modalities(*v, std::string("response.") + name);
            if (!modalities) return error(modalities.error(), event_id);
            response->modalities = *modalities;
        }
    }
    if (const json* v = get("instructions")) {
        if (!v->is_string())
            return error(param_error("must be a string", "response.instructions"), event_id);
        instructions = v->get<std::string>();
    }
    const json* voice = get("voice");
    if (const json* audio = get("audio"); audio != nullptr && audio->is_object()) {
        if (auto output = audio->find("output"); output != audio->end() && output->is_object()) {
            if (auto v = output->find("voice"); v != output->end() && !v->is_null()) voice = &*v;
        }
    }
    if (voice != nullptr) {
        auto parsed = parse_voice(*voice, "response.audio.output.voice", options_.choices);
        if (!parsed) return error(parsed.error(), event_id);
        response->voice = *parsed;
    }
    for (const char* name : {"max_output_tokens", "max_response_output_tokens"}) {
        if (const json* v = get(name)) {
            auto tokens = parse_max_output_tokens(*v, std::string("response.") + name);
            if (!tokens) return error(tokens.error(), event_id);
            response->max_output_tokens = *tokens;
        }
    }
    if (const json* v = get("temperature")) {
        if (!v->is_number() || v->get<double>() < 0.0 || v->get<double>() > 2.0) {
            return error(param_error("must be a number in [0, 2]", "response.temperature"),
                         event_id);
        }
        temperature = v->get<double>();
    }
    if (const json* v = get("conversation")) {
        if (!v->is_string() || (*v != "auto" && *v != "none")) {
            return error(param_error("must be \"auto\" or \"none\"", "response.conversation"),
                         event_id);
        }
        response->in_conversation = *v == "auto";
    }
    if (const json* v = get("metadata")) {
        if (!v->is_object())
            return error(param_error("must be an object", "response.metadata"), event_id);
        response->metadata = *v;
    }
    openai::StageOverrides overrides = config_.overrides;
    if (params.contains("stage_sampling") || params.contains("stage_params")) {
        auto parsed = openai::parse_stage_overrides(params, options_.limits.request);
        if (!parsed) {
            ProtocolError e = parsed.error();
            e.param = "response." + e.param;
            return error(e, event_id);
        }
        overrides = std::move(*parsed);
    }
    if (const json* v = get("tools"); v != nullptr && (!v->is_array() || !v->empty())) {
        return error(
            param_error("function calling is not supported by this server", "response.tools"),
            event_id);
    }
    // The context: the conversation, or the items of response.input alone.
    std::vector<Item> input_items;
    const std::vector<Item>* items = &conversation_.items();
    if (const json* input = get("input")) {
        if (!input->is_array())
            return error(param_error("must be an array", "response.input"), event_id);
        for (std::size_t i = 0; i < input->size(); ++i) {
            const json& entry = (*input)[i];
            const std::string param = "response.input[" + std::to_string(i) + "]";
            if (entry.is_object() && entry.value("type", "") == "item_reference") {
                const Item* found = entry.contains("id") && entry["id"].is_string()
                                        ? conversation_.find(entry["id"].get<std::string>())
                                        : nullptr;
                if (found == nullptr)
                    return error(param_error("no such item", param + ".id"), event_id);
                input_items.push_back(*found);
                continue;
            }
            auto item = parse_item(entry, param, options_.limits);
            if (!item) return error(item.error(), event_id);
            input_items.push_back(std::move(*item));
        }
        items = &input_items;
    }
    auto messages = chat_messages(instructions, *items, options_.limits);
    if (!messages) return error(messages.error(), event_id);
    if (messages->empty()) {
        return error(
            param_error("there is nothing to respond to: the conversation is empty", "response"),
            event_id);
    }
    openai::ChatRequest request;
    request.model = options_.model_name;
    request.messages = std::move(*messages);
    request.modalities = response->audio_out() ? std::vector<std::string>{"text", "audio"}
                                               : std::vector<std::string>{"text"};
    request.audio_voice = response->voice;
    request.audio_format = "pcm16";
    request.max_tokens = response->max_output_tokens;
    request.sampling.temperature = temperature;
    request.stream = true;
    request.stage_sampling = std::move(overrides.sampling);
    request.stage_params = std::move(overrides.params);

    response->id = next_id("resp_");
    response->item_id = next_id("item_");
    const std::string id = response->id;
    response_ = std::move(response);
    ++stats_.responses;
    emit({{"type", "response.created"},
          {"response",
           {{"id", id},
            {"object", "realtime.response"},
            {"status", "in_progress"},
            {"status_details", nullptr},
            {"output", json::array()},
            {"output_modalities", response_->modalities},
            {"usage", nullptr}}}});
    std::weak_ptr<Session> weak = weak_from_this();
    ResponseBackend::Events events{.delta =
                                       [weak, id](const client::OutputDelta& delta) {
                                           if (auto self = weak.lock()) self->on_delta(id, delta);
                                       },
                                   .end =
                                       [weak, id](const Result<client::FinalOutput>& end) {
                                           if (auto self = weak.lock()) self->on_end(id, end);
                                       }};
    backend_calls_.push_back(
        {.id = id, .request = std::move(request), .events = std::move(events), .reason = {}});
}

void Session::start_output_item() {
    Response& r = *response_;
    r.item_started = true;
    Item item{.id = r.item_id, .role = "assistant", .status = "in_progress", .content = {}};
    item.content.push_back(
        Part{.type = r.audio_out() ? PartType::output_audio : PartType::output_text});
    emit({{"type", "response.output_item.added"},
          {"response_id", r.id},
          {"output_index", 0},
          {"item", item_json(item, options_.beta, false)}});
    if (r.in_conversation) add_item(item, std::nullopt);
    json part = r.audio_out() ? json{{"type", "audio"}, {"transcript", ""}}
                              : json{{"type", "text"}, {"text", ""}};
    emit({{"type", "response.content_part.added"},
          {"response_id", r.id},
          {"item_id", r.item_id},
          {"output_index", 0},
          {"content_index", 0},
          {"part", part}});
}

void Session::on_delta(const std::string& response_id, const client::OutputDelta& delta) {
    std::vector<BackendCall> calls;
    {
        std::lock_guard lock(mutex_);
        handle_delta(response_id, delta);
        calls.swap(backend_calls_);
    }
    run_backend_calls(std::move(calls));
}

void Session::handle_delta(const std::string& response_id, const client::OutputDelta& delta) {
    if (closed_ || !response_ || response_->id != response_id) return;
    Response& r = *response_;
    if (!r.item_started) start_output_item();
    const json where = {
        {"response_id", r.id}, {"item_id", r.item_id}, {"output_index", 0}, {"content_index", 0}};
    if (!delta.text.empty()) {
        r.text += delta.text;
        json event = where;
        event["type"] = name(r.audio_out() ? "response.output_audio_transcript.delta"
                                           : "response.output_text.delta");
        event["delta"] = delta.text;
        emit(std::move(event));
    }
    if (delta.audio && r.audio_out()) {
        auto pcm = to_pcm16(*delta.audio);
        if (!pcm) {
            const std::string reason = pcm.error().message;
            finish_output_item("incomplete");
            finish_response(
                "failed",
                {{"type", "failed"}, {"error", {{"type", "server_error"}, {"message", reason}}}},
                {});
            backend_calls_.push_back(
                {.id = response_id, .request = {}, .events = {}, .reason = reason});
            return;
        }
        if (pcm->empty()) return;
        r.audio.insert(r.audio.end(), pcm->begin(), pcm->end());
        json event = where;
        event["type"] = name("response.output_audio.delta");
        event["delta"] = base64_pcm16(*pcm);
        emit(std::move(event));
    }
}

void Session::on_end(const std::string& response_id, const Result<client::FinalOutput>& end) {
    std::lock_guard lock(mutex_);
    if (!response_ || response_->id != response_id) return;  // cancelled before
    if (!end) {
        if (response_->item_started) finish_output_item("incomplete");
        finish_response("failed",
                        {{"type", "failed"},
                         {"error",
                          {{"type", "server_error"},
                           {"code", to_string(end.error().code)},
                           {"message", end.error().message}}}},
                        {});
        return;
    }
    if (response_->text.empty() && end->text) response_->text = *end->text;
    if (!response_->item_started) start_output_item();
    const bool length = end->finish_reason == "length";
    finish_output_item(length ? "incomplete" : "completed");
    finish_response(
        length ? "incomplete" : "completed",
        length ? json{{"type", "incomplete"}, {"reason", "max_output_tokens"}} : json(nullptr),
        end->usage);
}

void Session::finish_output_item(const std::string& status) {
    Response& r = *response_;
    const json where = {
        {"response_id", r.id}, {"item_id", r.item_id}, {"output_index", 0}, {"content_index", 0}};
    Part part{.type = r.audio_out() ? PartType::output_audio : PartType::output_text};
    json part_event;
    if (r.audio_out()) {
        json done = where;
        done["type"] = name("response.output_audio.done");
        emit(std::move(done));
        json transcript = where;
        transcript["type"] = name("response.output_audio_transcript.done");
        transcript["transcript"] = r.text;
        emit(std::move(transcript));
        part.transcript = r.text;
        part.audio = r.audio;
        part_event = {{"type", "audio"}, {"transcript", r.text}};
    } else {
        json done = where;
        done["type"] = name("response.output_text.done");
        done["text"] = r.text;
        emit(std::move(done));
        part.text = r.text;
        part_event = {{"type", "text"}, {"text", r.text}};
    }
    json part_done = where;
    part_done["type"] = "response.content_part.done";
    part_done["part"] = part_event;
    emit(std::move(part_done));
    Item item{.id = r.item_id, .role = "assistant", .status = status, .content = {}};
    item.content.push_back(std::move(part));
    emit({{"type", "response.output_item.done"},
          {"response_id", r.id},
          {"output_index", 0},
          {"item", item_json(item, options_.beta, false)}});
    if (r.in_conversation) {
        if (Item* stored = conversation_.find(r.item_id)) {
            *stored = item;
            if (!options_.beta) {
                emit({{"type", "conversation.item.done"},
                      {"item", item_json(item, options_.beta, false)}});
            }
        }
    }
}

void Session::finish_response(const std::string& status, json status_details,
                              const client::TokenUsage& usage) {
    Response& r = *response_;
    json output = json::array();
    if (r.item_started) {
        if (const Item* item = conversation_.find(r.item_id); item != nullptr) {
            output.push_back(item_json(*item, options_.beta, false));
        } else {
            Item out{.id = r.item_id, .role = "assistant", .status = status, .content = {}};
            out.content.push_back(
                Part{.type = r.audio_out() ? PartType::output_audio : PartType::output_text,
                     .text = r.audio_out() ? "" : r.text,
                     .transcript = r.audio_out() ? r.text : ""});
            output.push_back(item_json(out, options_.beta, false));
        }
    }
    json response = {
        {"id", r.id},
        {"object", "realtime.response"},
        {"status", status},
        {"status_details", std::move(status_details)},
        {"output", std::move(output)},
        {"conversation_id", r.in_conversation ? json(config_.id) : json(nullptr)},
        {"output_modalities", r.modalities},
        {"max_output_tokens", r.max_output_tokens ? json(*r.max_output_tokens) : json("inf")},
        {"audio",
         {{"output",
           {{"format", {{"type", "audio/pcm"}, {"rate", kAudioRate}}}, {"voice", r.voice}}}}},
        {"usage",
         {{"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"input_tokens", usage.prompt_tokens},
          {"output_tokens", usage.completion_tokens}}},
        {"metadata", r.metadata.is_null() ? json(nullptr) : r.metadata}};
    response_.reset();
    emit({{"type", "response.done"}, {"response", std::move(response)}});
}

void Session::cancel_response(const std::string& reason) {
    if (!response_) return;
    const std::string id = response_->id;
    if (response_->item_started) finish_output_item("incomplete");
    finish_response("cancelled", {{"type", "cancelled"}, {"reason", reason}}, {});
    ++stats_.cancelled;
    // Once the lock is released. The backend's end event for it finds no response of that id
    // and is dropped.
    backend_calls_.push_back({.id = id, .request = {}, .events = {}, .reason = reason});
}

}  // namespace omnirt::serve::realtime
