// The demo thinker (composes a deterministic reply and streams it token by token) and the demo
// decode stage (passes the thinker's text result through).
#include <algorithm>
#include <array>
#include <optional>
#include <random>
#include <utility>

#include "demo/demo_stages.h"
#include "pipeline/simple_scheduler.h"
#include "pipeline/stage_args.h"
#include "pipeline/stage_factory.h"

namespace omnirt::demo {

using pipeline::Emitter;
using pipeline::Scheduler;
using pipeline::StageContext;
using pipeline::StageFactory;

namespace {

// Words a temperature above 0 appends. Picked with rng() % size (not a std distribution, whose
// output differs between standard libraries), so a seed gives the same text everywhere.
constexpr std::array<std::string_view, 16> kRandomWords = {
    "alpha", "bravo",   "charlie", "delta", "echo", "foxtrot",  "golf",  "hotel",
    "india", "juliett", "kilo",    "lima",  "mike", "november", "oscar", "papa"};

Error invalid(std::string message) {
    return Error{ErrorCode::invalid_argument, "demo.thinker: " + std::move(message)};
}

bool is_speech(const OmniRequest& request) {
    const Value* api = request.metadata.find("api");
    return api != nullptr && api->is_string() && api->as_string() == "audio.speech";
}

// What the thinker reads of a chat request's messages.
struct ChatSummary {
    std::string last_user_text;  // text parts of the last user message, joined by spaces
    std::int64_t words = 0;      // words of every message's text parts
    std::int64_t images = 0;
    std::int64_t audio_clips = 0;
    std::int64_t videos = 0;
};

Result<ChatSummary> summarize_chat(const Value& inputs) {
    ChatSummary summary;
    const Value* messages = inputs.find("messages");
    if (messages == nullptr || messages->is_null()) return summary;
    const List* list = messages->if_list();
    if (list == nullptr) return fail(invalid("inputs.messages must be a list"));
    for (const Value& message : *list) {
        if (!message.is_map()) return fail(invalid("inputs.messages items must be maps"));
        const Value* role = message.find("role");
        const bool user = role != nullptr && role->is_string() && role->as_string() == "user";
        std::string text;
        auto add_text = [&](const std::string& piece) {
            summary.words += count_demo_words(piece);
            if (!text.empty() && !piece.empty()) text += ' ';
            text += piece;
        };
        const Value* content = message.find("content");
        if (content == nullptr || content->is_null()) {
            // No content (an assistant tool call): nothing to read.
        } else if (const std::string* plain = content->if_string()) {
            add_text(*plain);
        } else if (const List* parts = content->if_list()) {
            for (const Value& part : *parts) {
                const Value* type = part.find("type");
                if (type == nullptr || !type->is_string()) {
                    return fail(invalid("inputs.messages content parts need a string 'type'"));
                }
                const std::string& kind = type->as_string();
                if (kind == "text") {
                    const Value* piece = part.find("text");
                    if (piece == nullptr || !piece->is_string()) {
                        return fail(invalid("inputs.messages text parts need a string 'text'"));
                    }
                    add_text(piece->as_string());
                } else if (kind == "image") {
                    ++summary.images;
                } else if (kind == "audio") {
                    ++summary.audio_clips;
                } else if (kind == "video") {
                    ++summary.videos;
                }
            }
        } else {
            return fail(invalid("inputs.messages content must be a string or a list of parts"));
        }
        if (user) summary.last_user_text = std::move(text);
    }
    return summary;
}

std::string count_phrase(std::int64_t count, std::string_view singular, std::string_view plural) {
    return std::to_string(count) + " " + std::string(count == 1 ? singular : plural);
}

// " (1 image, 2 audio clips)" or "" without media.
std::string media_mention(const ChatSummary& chat) {
    std::vector<std::string> pieces;
    if (chat.images > 0) pieces.push_back(count_phrase(chat.images, "image", "images"));
    if (chat.audio_clips > 0) {
        pieces.push_back(count_phrase(chat.audio_clips, "audio clip", "audio clips"));
    }
    if (chat.videos > 0) pieces.push_back(count_phrase(chat.videos, "video", "videos"));
    if (pieces.empty()) return "";
    std::string out = " (";
    for (std::size_t i = 0; i < pieces.size(); ++i) out += (i == 0 ? "" : ", ") + pieces[i];
    return out + ")";
}

struct Sampling {
    double temperature = 0;
    std::uint64_t seed = 0;
};

// `params.sampling`, overlaid by `params.stage_sampling[stage_name]`; the seed falls back to
// params.seed.
Result<Sampling> read_sampling(const Value& params, std::string_view stage_name) {
    struct Layer {
        std::string where;
        const Value* values;
        bool has_temperature;  // params itself holds only a seed
    };
    std::vector<Layer> layers;  // most specific first
    if (const Value* stages = params.find("stage_sampling"); stages && !stages->is_null()) {
        if (!stages->is_map()) return fail(invalid("params.stage_sampling must be a map"));
        if (const Value* mine = stages->find(stage_name); mine && !mine->is_null()) {
            const std::string where = "params.stage_sampling." + std::string(stage_name);
            if (!mine->is_map()) return fail(invalid(where + " must be a map"));
            layers.push_back({where, mine, true});
        }
    }
    if (const Value* sampling = params.find("sampling"); sampling && !sampling->is_null()) {
        if (!sampling->is_map()) return fail(invalid("params.sampling must be a map"));
        layers.push_back({"params.sampling", sampling, true});
    }
    layers.push_back({"params", &params, false});
    Sampling out;
    bool temperature_set = false;
    bool seed_set = false;
    for (const auto& [where, layer, has_temperature] : layers) {
        const Value* temperature = has_temperature ? layer->find("temperature") : nullptr;
        if (!temperature_set && temperature != nullptr && !temperature->is_null()) {
            if (!temperature->is_number() || temperature->as_number() < 0) {
                return fail(invalid(where + ".temperature must be a non-negative number, got " +
                                    temperature->debug_string()));
            }
            out.temperature = temperature->as_number();
            temperature_set = true;
        }
        const Value* seed = layer->find("seed");
        if (!seed_set && seed != nullptr && !seed->is_null()) {
            const std::int64_t* value = seed->if_int();
            if (value == nullptr) {
                return fail(
                    invalid(where + ".seed must be an integer, got " + seed->debug_string()));
            }
            out.seed = static_cast<std::uint64_t>(*value);
            seed_set = true;
        }
    }
    return out;
}

std::string random_words(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const std::uint64_t count = 3 + rng() % 4;
    std::string out;
    for (std::uint64_t i = 0; i < count; ++i) {
        out += ' ';
        out += kRandomWords[rng() % kRandomWords.size()];
    }
    return out;
}

Result<std::vector<std::string>> read_stop_strings(const Value& params) {
    std::vector<std::string> stops;
    const Value* stop = params.find("stop");
    if (stop == nullptr || stop->is_null()) return stops;
    const List* list = stop->if_list();
    if (list == nullptr) return fail(invalid("params.stop must be a list of strings"));
    for (const Value& item : *list) {
        const std::string* text = item.if_string();
        if (text == nullptr) return fail(invalid("params.stop must be a list of strings"));
        if (!text->empty()) stops.push_back(*text);
    }
    return stops;
}

Result<std::optional<std::int64_t>> read_max_tokens(const Value& params) {
    const Value* max_tokens = params.find("max_tokens");
    if (max_tokens == nullptr || max_tokens->is_null()) return std::optional<std::int64_t>();
    const std::int64_t* value = max_tokens->if_int();
    if (value == nullptr || *value < 0) {
        return fail(invalid("params.max_tokens must be a non-negative integer, got " +
                            max_tokens->debug_string()));
    }
    return std::optional(*value);
}

Result<StagePayload> run_thinker(const std::string& stage, const std::vector<std::string>& targets,
                                 const StagePayload& input, Emitter& emit) {
    OMNI_TRY(DemoReply reply, compose_demo_reply(input.request, stage));
    OMNI_TRY(std::chrono::milliseconds delay, demo_token_delay(input.request, stage));
    OMNI_TRY(bool audio, demo_wants_audio(input.request));
    DemoVoiceSettings voice;
    if (audio) {
        OMNI_TRY(voice, demo_voice_settings(input.request));
    }
    std::string text;
    for (std::size_t i = 0; i < reply.tokens.size(); ++i) {
        if (i > 0 && delay.count() > 0 && emit.wait_for_abort(delay)) {
            return fail(ErrorCode::aborted, "demo.thinker: aborted");
        }
        const std::string& token = reply.tokens[i];
        text += token;
        bool sent = emit.emit(Value(Map{{"text", Value(token)}}));
        if (audio) {
            const Value chunk(Map{{"text", Value(token)},
                                  {"voice", Value(voice.voice)},
                                  {"speed", Value(voice.speed)}});
            for (const std::string& target : targets) sent = emit.emit(chunk, target) && sent;
        }
        if (!sent) return fail(ErrorCode::aborted, "demo.thinker: aborted");
    }
    const auto completion_tokens = static_cast<std::int64_t>(reply.tokens.size());
    return StagePayload{
        .request_id = input.request_id,
        .request = input.request,
        .data = Value(Map{{"text", Value(std::move(text))},
                          {"finish_reason", Value(reply.finish_reason)},
                          {"usage", Value(Map{{"prompt_tokens", Value(reply.prompt_tokens)},
                                              {"completion_tokens", Value(completion_tokens)}})}})};
}

Result<std::unique_ptr<Scheduler>> thinker_factory(const StageContext& context) {
    return pipeline::make_simple_scheduler(
        context,
        [stage = context.stage_name, targets = context.stream_to](
            const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
            return run_thinker(stage, targets, input, emit);
        },
        4);
}

Result<std::unique_ptr<Scheduler>> decode_factory(const StageContext& context) {
    return pipeline::make_simple_scheduler(
        context, [](const StagePayload& input, Emitter&) -> Result<StagePayload> {
            Map data;
            for (const char* key : {"text", "finish_reason", "usage"}) {
                const Value* value = input.data.find(key);
                if (value == nullptr) {
                    return fail(ErrorCode::invalid_argument,
                                std::string("demo.decode: the input has no '") + key +
                                    "' (expected the demo thinker's result)");
                }
                data.emplace(key, *value);
            }
            return StagePayload{.request_id = input.request_id,
                                .request = input.request,
                                .data = Value(std::move(data))};
        });
}

}  // namespace

Result<DemoReply> compose_demo_reply(const OmniRequest& request, std::string_view stage_name) {
    DemoReply reply;
    std::string text;
    if (is_speech(request)) {
        const Value* speech = request.inputs.find("text");
        if (speech == nullptr || !speech->is_string()) {
            return fail(invalid("inputs.text must be a string"));
        }
        text = speech->as_string();
        reply.prompt_tokens = count_demo_words(text);
    } else {
        OMNI_TRY(ChatSummary chat, summarize_chat(request.inputs));
        OMNI_TRY(Sampling sampling, read_sampling(request.params, stage_name));
        text = chat.last_user_text.empty() ? "You said nothing."
                                           : "You said: " + chat.last_user_text + ".";
        text += media_mention(chat);
        if (sampling.temperature > 0) text += random_words(sampling.seed);
        reply.prompt_tokens = chat.words;
    }
    OMNI_TRY(std::vector<std::string> stops, read_stop_strings(request.params));
    std::size_t cut = text.size();
    for (const std::string& stop : stops) cut = std::min(cut, text.find(stop));
    text.resize(cut);
    reply.tokens = split_demo_tokens(text);
    reply.finish_reason = "stop";
    OMNI_TRY(std::optional<std::int64_t> max_tokens, read_max_tokens(request.params));
    if (max_tokens && static_cast<std::int64_t>(reply.tokens.size()) > *max_tokens) {
        reply.tokens.resize(static_cast<std::size_t>(*max_tokens));
        if (!reply.tokens.empty()) {
            std::string& last = reply.tokens.back();
            while (!last.empty() &&
                   (last.back() == ' ' || last.back() == '\t' || last.back() == '\n' ||
                    last.back() == '\r' || last.back() == '\v' || last.back() == '\f')) {
                last.pop_back();
            }
        }
        reply.finish_reason = "length";
    }
    return reply;
}

namespace demo_stages_detail {

Status register_thinker_stages(Registry& registry) {
    OMNI_RETURN_IF_ERROR(registry.add_if_absent(
        FunctionKind::factory, "demo.thinker",
        RegistryEntry{.callable = StageFactory(thinker_factory),
                      .description = "streams a deterministic reply token by token (text to the "
                                     "client, text + voice to stream_to when audio is wanted); "
                                     "data = {text, finish_reason, usage}"}));
    return registry.add_if_absent(FunctionKind::factory, "demo.decode",
                                  RegistryEntry{.callable = StageFactory(decode_factory),
                                                .description = "passes the demo thinker's {text, "
                                                               "finish_reason, usage} through"});
}

}  // namespace demo_stages_detail

}  // namespace omnirt::demo
