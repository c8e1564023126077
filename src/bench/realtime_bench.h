#pragma once
// `omnirt bench realtime`: spoken conversations over the realtime API (GET /v1/realtime), per
// number of concurrent sessions.
//
// The bench runs a pipeline (the demo pipeline unless a config is given) and the API server in
// this process, with server VAD (Silero, the model file of `vad_model`), and opens `sessions`
// WebSocket clients. Each session streams a speech recording followed by silence, at real time
// in 20 ms appends (as a microphone would), `turns` times, the sessions' starts spread over one
// turn (or all at once with `lockstep`); the server detects the end of each
// turn and answers with speech. A last turn per session measures barge-in: the client starts
// speaking again as soon as the answer's first audio arrives.
//
// Figures per level:
//   - answer latency: from input_audio_buffer.speech_stopped (the VAD's decision) to the first
//     response.output_audio.delta, p50 / p99 (what the server adds after the turn ended);
//   - VAD lag: from sending the audio at speech_stopped's audio_end_ms + silence_duration_ms
//     (the silence that decides the turn) to receiving speech_stopped, p50 (appends go out at
//     real time, so audio at session time m went out m ms after the first);
//   - audio speed: seconds of answer audio per second of wall time between the first and the
//     last delta, the slowest session (above 1: faster than real time);
//   - barge-in: from sending the audio at the new speech's onset (speech_started's
//     audio_start_ms) to response.done (cancelled), p50 / p99: the detector's window, the
//     protocol and the cancel.
//
// Threads: run_realtime_bench blocks; two threads per session (reader, writer).
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::bench {

struct RealtimeBenchOptions {
    std::vector<int> sessions = {1};
    int turns = 2;            // measured turns per session, before the barge-in turn
    std::string config_text;  // the pipeline (YAML); empty: config_path
    std::string config_path;
    std::string vad_model;           // Silero VAD v5 ONNX file
    std::string audio_path;          // a speech recording (any rate; mixed to mono)
    int silence_duration_ms = 500;   // turn_detection.silence_duration_ms
    int trailing_silence_ms = 1000;  // silence sent after each recording
    // Caps of each answer, for pipelines of random weights: max_output_tokens and
    // stage_sampling.talker.max_tokens (0: not sent).
    int max_output_tokens = 32;
    int max_talker_frames = 0;
    // session.stage_params (a JSON object; "" for none), e.g. the demo thinker's token_delay_ms
    // so that answers stream over time as a model's do.
    std::string stage_params;
    // Every session starts its turns at the same moment (the worst case) instead of spread over
    // one turn's length (independent speakers).
    bool lockstep = false;
};

struct RealtimeLevel {
    int sessions = 0;
    int turns = 0;  // measured
    int failed = 0;
    double answer_p50_ms = 0;
    double answer_p99_ms = 0;
    double vad_lag_p50_ms = 0;
    double audio_speed_min = 0;  // seconds of audio per wall second, slowest session
    double barge_in_p50_ms = 0;
    double barge_in_p99_ms = 0;
};

struct RealtimeBenchReport {
    RealtimeBenchOptions options;
    std::string cpu;
    std::vector<RealtimeLevel> levels;
};

[[nodiscard]] Result<RealtimeBenchReport> run_realtime_bench(const RealtimeBenchOptions& options);
[[nodiscard]] std::string format_realtime_table(const RealtimeBenchReport& report);
[[nodiscard]] std::string realtime_report_json(const RealtimeBenchReport& report);

}  // namespace omnirt::bench
