#pragma once
// ApiServer: the OpenAI-compatible HTTP front end of a running pipeline (docs/serve.md).
//
//   GET  /health                 200 / 503 with per-stage state
//   GET  /health/live            200 unless a stage failed for good (liveness probes)
//   GET  /v1/models              the served model
//   POST /v1/chat/completions    text and audio, streaming (SSE) or not
//   POST /v1/completions         text completions of a prompt (string or token ids)
//   POST /v1/audio/speech        audio in wav / pcm / flac / opus / mp3, or SSE
//   POST /tokenize, /detokenize  the model's tokenizer (vLLM shape; needs a tokenizer)
//   GET  /metrics                Prometheus text
//   POST /start_profile, /stop_profile
//   GET  /v1/audio/voices        the voices the model speaks with
//   GET  /, /playground/<file>   the browser playground (docs/playground.md)
//
// The server never blocks an IO thread: requests go to the pipeline through the client's
// callback API, responses are written from a small worker pool (parsing chunks, time-stretching
// and encoding audio), each request's events in order. A client that goes away aborts its
// request in every stage.
//
// Thread safety: create / start / drain / stop from one owner thread; the client must outlive
// the server.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "client/client.h"
#include "core/error.h"
#include "core/value.h"
#include "serve/api/metrics.h"
#include "serve/api/saved_voices.h"
#include "serve/http/http_server.h"
#include "serve/openai/limits.h"
#include "serve/realtime/voice_activity.h"

namespace omnirt::text {
class Tokenizer;
}

namespace omnirt::serve::api {

struct ApiServerOptions {
    std::string model_name;  // the id /v1/models lists; requests naming another model get 404
    std::string api_key;     // non-empty: /v1/* and the profiler need "Authorization: Bearer KEY"
    std::size_t max_concurrency = 0;  // generation requests at once; 0: no limit
    // Requests beyond max_concurrency that wait for a slot (first come, first served); beyond
    // them 429 with Retry-After. 0: no waiting.
    std::size_t max_queue = 0;
    // Per-request deadline (the request fails with 504 when it passes). 0: none.
    std::chrono::milliseconds request_timeout{0};
    // Where profiler traces go: start_profile writes {dir}/trace-{stage}-{pid}.json templates.
    std::string profile_dir = "/tmp/omnirt-profile";
    int worker_threads = 2;  // the pool for whole-file audio encoding
    // The served model's tokenizer, for /tokenize and /detokenize (without one they answer
    // 404), and its context length (reported as max_model_len; 0: unknown).
    std::shared_ptr<const text::Tokenizer> tokenizer;
    std::int64_t max_model_len = 0;
    // The served model's chat template, for /tokenize of chat messages: renders the request's
    // messages (OmniRequest inputs.messages), errors start with `who`. Empty: /tokenize takes
    // prompts only. Called from IO threads: must not block and be safe from any thread (the
    // model family's renderer, models/family.h).
    std::function<Result<std::string>(const Value& messages, bool add_generation_prompt,
                                      const std::string& who)>
        render_chat;
    // The voices the served model speaks with, lower-case (the model family's, from the
    // checkpoint); a chat request that wants audio in another voice gets a 400 on audio.voice
    // before anything runs. Empty: any voice goes to the pipeline.
    std::vector<std::string> voices;
    // Saved reference voices (--voices-dir, saved_voices.h): a speech request's `voice` that
    // names one becomes its `references`; listed by GET /v1/audio/voices after `voices`. Only
    // for pipelines that clone voices from inputs.references. Null: none.
    std::shared_ptr<const SavedVoices> saved_voices;
    // The server applies a speech request's `speed` by time-stretching the pipeline's audio,
    // keeping pitch (media/time_stretch.h; streamed chunk by chunk), and asks the pipeline for
    // speed 1. Off: inputs.speed goes to the pipeline, which applies it itself (the demo
    // talker). omnirt serve turns it on for model-family pipelines (their stages ignore speed).
    bool time_stretch_speech = false;
    // Streamed speech over SSE in SGLang-Omni's event form instead of OpenAI's (for its clients,
    // e.g. its benchmark's --stream): every event's `audio.data` is a whole file of the chunk in
    // the response_format, the last event has the usage, then [DONE] (responses.h). Raw
    // (stream_format "audio") and whole answers are the same in both. `omnirt serve
    // --speech-sse sglang`.
    bool sglang_speech_sse = false;
    // Voice activity detection for the realtime API's server_vad (GET /v1/realtime); empty:
    // realtime sessions commit their audio by hand only.
    realtime::VoiceActivityFactory vad;
    std::size_t max_realtime_sessions = 256;  // open WebSockets on /v1/realtime; beyond: 429
    openai::RequestLimits limits;
    openai::MediaPolicy media;
    http::HttpServerOptions http;
};

class ApiServer {
  public:
    [[nodiscard]] static Result<std::unique_ptr<ApiServer>> create(ApiServerOptions options,
                                                                   client::Client& client);
    ~ApiServer();  // stop()
    ApiServer(const ApiServer&) = delete;
    ApiServer& operator=(const ApiServer&) = delete;

    [[nodiscard]] Status start();
    [[nodiscard]] std::uint16_t port() const;
    // Stops accepting, lets in-flight responses finish up to `timeout`, then stops.
    [[nodiscard]] Status drain(std::chrono::milliseconds timeout);
    void stop();

    [[nodiscard]] const ServerMetrics& metrics() const;

    struct State;

  private:
    explicit ApiServer(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace omnirt::serve::api
