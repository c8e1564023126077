#pragma once
// The built-in demo stages: a miniature of the Qwen3-Omni speech topology made without any
// model (configs/demo.yaml, docs/demo_pipeline.md). `omnirt serve --demo` runs them, so the
// HTTP server, the OpenAI layer and clients can be exercised end to end with streamed text and
// audio. Everything is deterministic; the only waiting is the optional per-token delay.
//
//   thinker --(next, route_fn)--> decode (terminal: the text result)
//      |  stream (text deltas + voice settings), only when the request wants audio
//      v
//   talker (StreamingScheduler, terminal: the audio result)
//
// Factories (FunctionKind::factory):
//   demo.thinker  SimpleScheduler, args {worker_threads: int = 4}. Composes the reply of the
//                 request (compose_demo_reply), streams it token by token to the client as
//                 {"text": delta} and, when the request wants audio, to every stream_to stage as
//                 {"text": delta, "voice": str, "speed": number}; waits token_delay_ms between
//                 tokens (abortable). data = {"text", "finish_reason": "stop" | "length",
//                 "usage": {"prompt_tokens", "completion_tokens"}}.
//   demo.decode   SimpleScheduler: passes the thinker's {text, finish_reason, usage} through.
//   demo.talker   StreamingScheduler: per text chunk, synthesizes audio (synthesize_demo_audio)
//                 and streams {"audio": float32 [n], "sample_rate": 24000} to the client (none
//                 for a chunk that makes no samples); on done, data = {"audio": float32 [all
//                 samples], "sample_rate": 24000, "transcript": the concatenated chunk texts}.
// Functions (they name the stages of configs/demo.yaml: decode, talker):
//   route            demo.route_thinker        [decode] or [decode, talker] (audio wanted)
//   stream_done      demo.thinker_stream_done  [] or [talker] (audio wanted)
//   terminal_stages  demo.terminal_stages      [decode] or [decode, talker] (audio wanted)
//
// The request layout is the OpenAI layer's (docs/serve_openai.md, "The OmniRequest layout
// stages read"). Malformed fields are invalid_argument errors naming the field.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/registry.h"
#include "core/request.h"

namespace omnirt::demo {

inline constexpr std::int64_t kDemoSampleRate = 24000;
// 15 ms at 24 kHz, at speed 1.
inline constexpr std::int64_t kDemoSamplesPerCharacter = 360;
inline constexpr float kDemoAmplitude = 0.25F;
inline constexpr std::int64_t kDemoMaxTokenDelayMs = 10000;
inline constexpr double kDemoMinSpeed = 0.25;
inline constexpr double kDemoMaxSpeed = 4.0;
// The stage names the demo functions return (configs/demo.yaml).
inline constexpr std::string_view kDemoDecodeStage = "decode";
inline constexpr std::string_view kDemoTalkerStage = "talker";

// Registers every demo stage and function. Idempotent: names already registered are kept.
// Thread-safe.
[[nodiscard]] Status register_demo_stages(Registry& registry = Registry::global());

// True for metadata.api == "audio.speech" and for chat requests whose inputs.modalities
// contains "audio". invalid_argument when modalities is not a list of strings.
[[nodiscard]] Result<bool> demo_wants_audio(const OmniRequest& request);

struct DemoReply {
    // The reply split into tokens (split_demo_tokens); their concatenation is the reply text.
    std::vector<std::string> tokens;
    std::string finish_reason;  // "stop" or "length"
    std::int64_t prompt_tokens = 0;
};

// The thinker's reply to `request`, as stage `stage_name` (whose stage_sampling overlays
// params.sampling):
//  * speech (metadata.api == "audio.speech"): inputs.text exactly; prompt_tokens = its words;
//  * chat: "You said: <text parts of the last user message, joined by spaces>." ("You said
//    nothing." without text), then " (1 image, 2 audio clips, 1 video)" for the media parts
//    of all messages, then, with temperature > 0, 3 to 6 words from a fixed list picked by a
//    std::mt19937_64 seeded with the seed (stage_sampling, sampling, then params.seed; 0 when
//    none); prompt_tokens = the words of every message's text parts;
//  * then the text is cut before the earliest occurrence of any params.stop string (empty
//    strings are ignored), split into tokens, and capped at params.max_tokens tokens
//    (finish_reason "length"; the last kept token loses its trailing whitespace).
[[nodiscard]] Result<DemoReply> compose_demo_reply(const OmniRequest& request,
                                                   std::string_view stage_name);

// params.stage_params[stage_name].token_delay_ms: an int in [0, kDemoMaxTokenDelayMs]; 0 when
// absent.
[[nodiscard]] Result<std::chrono::milliseconds> demo_token_delay(const OmniRequest& request,
                                                                 std::string_view stage_name);

struct DemoVoiceSettings {
    std::string voice;  // "" = the default voice
    double speed = 1.0;
};

// Speech: inputs.voice and inputs.speed (a number in [kDemoMinSpeed, kDemoMaxSpeed]); chat:
// inputs.audio.voice and speed 1. Absent fields give the defaults.
[[nodiscard]] Result<DemoVoiceSettings> demo_voice_settings(const OmniRequest& request);

// Tokens of `text`: each whitespace-separated word with the whitespace that follows it (the
// first also with the whitespace before it), so that they concatenate to `text` exactly. A
// text without a word gives no tokens.
[[nodiscard]] std::vector<std::string> split_demo_tokens(std::string_view text);

// Whitespace-separated words in `text`.
[[nodiscard]] std::int64_t count_demo_words(std::string_view text);

// The tone base of a voice: 220 Hz for "" and "alloy"; otherwise 150 + (FNV-1a 64 of the name
// % 200) Hz.
[[nodiscard]] double demo_voice_base_hz(std::string_view voice);

// Mono audio at kDemoSampleRate for `text` (UTF-8; invalid bytes count as U+FFFD): per code
// point, round(kDemoSamplesPerCharacter / speed) samples of silence for whitespace, else of a
// sine at base_hz + (code point % 24) * 25 Hz with amplitude kDemoAmplitude and 2 ms linear
// fades at both ends. Each character starts at phase 0, so the audio of a text is the
// concatenation of the audio of its pieces. `speed` must be positive.
[[nodiscard]] std::vector<float> synthesize_demo_audio(std::string_view text, double base_hz,
                                                       double speed);

namespace demo_stages_detail {
// The parts of register_demo_stages, one per source file.
[[nodiscard]] Status register_thinker_stages(Registry& registry);  // demo.thinker, demo.decode
[[nodiscard]] Status register_talker_stage(Registry& registry);    // demo.talker
}  // namespace demo_stages_detail

}  // namespace omnirt::demo
