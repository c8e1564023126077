// The demo talker: turns the thinker's streamed text into tones, one audio delta per chunk.
#include <algorithm>
#include <any>
#include <cmath>
#include <numbers>
#include <utility>

#include "demo/demo_stages.h"
#include "pipeline/stage_factory.h"
#include "pipeline/streaming_scheduler.h"

namespace omnirt::demo {

using pipeline::Emitter;
using pipeline::Scheduler;
using pipeline::StageContext;
using pipeline::StageFactory;
using pipeline::StreamChunk;
using pipeline::StreamingScheduler;
using pipeline::StreamRequestState;

namespace {

constexpr std::int64_t kFadeSamples = kDemoSampleRate * 2 / 1000;  // 2 ms

// Decodes one UTF-8 code point at text[i] and advances i; invalid bytes give U+FFFD (one byte).
char32_t next_code_point(std::string_view text, std::size_t& i) {
    const auto byte = [&](std::size_t at) { return static_cast<unsigned char>(text[at]); };
    const unsigned char lead = byte(i);
    std::size_t length = 0;
    char32_t point = 0;
    if (lead < 0x80) {
        ++i;
        return lead;
    } else if ((lead & 0xE0) == 0xC0) {
        length = 2;
        point = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
        length = 3;
        point = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
        length = 4;
        point = lead & 0x07;
    } else {
        ++i;
        return 0xFFFD;
    }
    if (i + length > text.size()) {
        ++i;
        return 0xFFFD;
    }
    for (std::size_t k = 1; k < length; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) {
            ++i;
            return 0xFFFD;
        }
        point = (point << 6) | (byte(i + k) & 0x3F);
    }
    i += length;
    return point;
}

bool is_whitespace(char32_t point) {
    return (point >= 0x09 && point <= 0x0D) || point == 0x20 || point == 0x85 || point == 0xA0 ||
           point == 0x1680 || (point >= 0x2000 && point <= 0x200A) || point == 0x2028 ||
           point == 0x2029 || point == 0x202F || point == 0x205F || point == 0x3000;
}

// The talker's per-request state (StreamRequestState::user).
struct TalkerState {
    std::vector<float> audio;
    std::string transcript;
};

TalkerState& talker_state(StreamRequestState& state) {
    if (!state.user.has_value()) state.user = TalkerState{};
    return std::any_cast<TalkerState&>(state.user);
}

Error invalid_chunk(const std::string& from_stage, std::string_view what) {
    return Error{ErrorCode::invalid_argument, "demo.talker: the chunk from '" + from_stage + "' " +
                                                  std::string(what) +
                                                  " (expected {text, voice?, speed?})"};
}

Status on_chunk(StreamRequestState& state, const std::string& from_stage, const StreamChunk& chunk,
                Emitter& emit) {
    const Value* text = chunk.chunk.find("text");
    if (text == nullptr || !text->is_string()) {
        return fail(invalid_chunk(from_stage, "has no string 'text'"));
    }
    std::string voice;
    if (const Value* name = chunk.chunk.find("voice"); name != nullptr && !name->is_null()) {
        if (!name->is_string()) return fail(invalid_chunk(from_stage, "has a non-string 'voice'"));
        voice = name->as_string();
    }
    double speed = 1.0;
    if (const Value* value = chunk.chunk.find("speed"); value != nullptr && !value->is_null()) {
        if (!value->is_number() || value->as_number() < kDemoMinSpeed ||
            value->as_number() > kDemoMaxSpeed) {
            return fail(invalid_chunk(from_stage, "has a 'speed' outside [0.25, 4]"));
        }
        speed = value->as_number();
    }
    TalkerState& talker = talker_state(state);
    std::vector<float> samples =
        synthesize_demo_audio(text->as_string(), demo_voice_base_hz(voice), speed);
    talker.transcript += text->as_string();
    if (samples.empty()) return ok_status();
    talker.audio.insert(talker.audio.end(), samples.begin(), samples.end());
    // A false return means the request was aborted; the scheduler drops its state.
    emit.emit(Value(Map{{"audio", Value(Tensor::from_vector(samples))},
                        {"sample_rate", Value(kDemoSampleRate)}}));
    return ok_status();
}

Result<StagePayload> on_done(StreamRequestState& state, Emitter&) {
    TalkerState& talker = talker_state(state);
    return StagePayload{.request_id = state.request_id,
                        .request = state.payload->request,
                        .data = Value(Map{{"audio", Value(Tensor::from_vector(talker.audio))},
                                          {"sample_rate", Value(kDemoSampleRate)},
                                          {"transcript", Value(std::move(talker.transcript))}})};
}

Result<std::unique_ptr<Scheduler>> talker_factory(const StageContext& context) {
    OMNI_TRY(auto scheduler,
             StreamingScheduler::create({.stage_name = context.stage_name,
                                         .stream_sources = context.stream_sources,
                                         .handler = {.on_chunk = on_chunk, .on_done = on_done},
                                         .tracer = context.tracer}));
    return std::unique_ptr<Scheduler>(std::move(scheduler));
}

}  // namespace

double demo_voice_base_hz(std::string_view voice) {
    if (voice.empty() || voice == "alloy") return 220.0;
    std::uint64_t hash = 14695981039346656037ULL;  // FNV-1a 64
    for (char c : voice) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 1099511628211ULL;
    }
    return 150.0 + static_cast<double>(hash % 200);
}

std::vector<float> synthesize_demo_audio(std::string_view text, double base_hz, double speed) {
    OMNI_CHECK(speed > 0, "synthesize_demo_audio: speed must be positive");
    const auto per_character = std::max<std::int64_t>(
        1, std::llround(static_cast<double>(kDemoSamplesPerCharacter) / speed));
    const std::int64_t fade = std::min(kFadeSamples, per_character / 2);
    std::vector<float> audio;
    std::size_t i = 0;
    while (i < text.size()) {
        const char32_t point = next_code_point(text, i);
        const std::size_t start = audio.size();
        audio.resize(start + static_cast<std::size_t>(per_character), 0.0F);
        if (is_whitespace(point)) continue;
        const double hz = base_hz + static_cast<double>(point % 24) * 25.0;
        const double step = 2.0 * std::numbers::pi * hz / static_cast<double>(kDemoSampleRate);
        for (std::int64_t k = 0; k < per_character; ++k) {
            double gain = kDemoAmplitude;
            if (fade > 0 && k < fade) gain *= static_cast<double>(k) / static_cast<double>(fade);
            const std::int64_t from_end = per_character - 1 - k;
            if (fade > 0 && from_end < fade) {
                gain *= static_cast<double>(from_end) / static_cast<double>(fade);
            }
            audio[start + static_cast<std::size_t>(k)] =
                static_cast<float>(gain * std::sin(step * static_cast<double>(k)));
        }
    }
    return audio;
}

namespace demo_stages_detail {

Status register_talker_stage(Registry& registry) {
    return registry.add_if_absent(
        FunctionKind::factory, "demo.talker",
        RegistryEntry{.callable = StageFactory(talker_factory),
                      .description = "StreamingScheduler: synthesizes tones for each streamed "
                                     "text chunk; data = {audio, sample_rate, transcript}"});
}

}  // namespace demo_stages_detail

}  // namespace omnirt::demo
