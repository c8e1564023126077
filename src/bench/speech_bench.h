#pragma once
// `omnirt bench speech`: streaming speech output of Qwen3-Omni or Fish Audio S2-Pro, per
// concurrency level.
//
// Two modes:
//  * code2wav only: the qwen3_omni.code2wav stage itself (the factory from the Qwen3-Omni
//    plugin, driven through its inbox and outbox, so its batching across streams is measured)
//    with streams of random codes, `audio_seconds` of audio each (12.5 frames per second, 1920
//    samples per frame at 24 kHz). Every frame of a stream is queued at once when the stream
//    starts (the talker faster than real time); streams run in a closed loop, `concurrency` in
//    flight. Preset "real" is Qwen3-Omni-30B-A3B's config.json with dummy weights
//    (load_format dummy): the real vocoder sizes.
//  * pipeline (default): a pipeline config in this process (configs/qwen3_omni_speech.yaml
//    beside the build unless config_path is set) with chat requests asking for text and audio;
//    any config whose stages stream client chunks {"audio": f32 [n], "sample_rate": r} works
//    (configs/demo.yaml with model_path "none" too). `pipeline` "s2_pro" runs S2-Pro's text to
//    speech instead (configs/s2_pro_tts.yaml, a generated s2_pro checkpoint, speech requests
//    with max_frames frames at most and, with reference_seconds > 0, a reference clip of that
//    length that the preprocessing stage encodes for every request).
//
// Figures per level: time to first audio chunk (p50 / p99), real-time factor per stream (wall
// time of the stream / seconds of its audio, p50 / p99) and aggregate (wall time of the level /
// seconds of all audio), frames per second (seconds of audio * the model's frame rate / wall:
// 12.5 for Qwen3-Omni, 44100 / 2048 for S2-Pro). Code2wav only also
// gives the stage's compute time over the audio time and the mean rows per forward; pipeline
// mode the compute per request of each stage from the profiler's spans.
//
// Threads: run_speech_bench blocks the calling thread; it starts the stage or pipeline itself.
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::bench {

inline constexpr double kSpeechFramesPerSecond = 12.5;
inline constexpr double kS2ProFramesPerSecond = 44100.0 / 2048.0;

struct SpeechBenchOptions {
    std::string pipeline = "qwen3_omni";  // qwen3_omni | s2_pro (pipeline mode only)
    double reference_seconds = 0;         // s2_pro: a reference clip of this length (0: none)
    std::string preset = "tiny";          // tiny | small | real (real: code2wav only)
    std::string model_path;   // a checkpoint instead of a generated one ("none" for demo)
    std::string config_path;  // pipeline mode; empty: configs/qwen3_omni_speech.yaml
    std::vector<int> concurrency = {1};
    int requests = 8;            // streams per level (at least the level's concurrency)
    int warmup = 1;              // unmeasured streams before the first level
    int first_chunk_frames = 0;  // > 0: overrides the code2wav stage's first_chunk_frames
    bool code2wav_only = false;
    // S2-Pro: the s2_pro.vocoder stage alone (codec decoder, dummy weights of the preset's codec
    // sizes; real = the release's), one stream at a time, each frame its own chunk as the AR
    // stage sends them; reports the cost of every audio chunk as the utterance grows.
    bool vocoder_only = false;
    int max_tokens = 32;  // pipeline mode: params.max_tokens
    // Pipeline mode: params.stage_sampling.talker.max_tokens, the talker's frames at most (a
    // random-weight talker rarely says its EOS); 50 frames are 4 s of audio. S2-Pro: the
    // request's max_tokens (its frames); 50 frames are 2.3 s.
    int max_frames = 50;
    double audio_seconds = 4.0;     // code2wav / vocoder only: audio per stream
    int max_batch_streams = 8;      // code2wav only: the stage's max_batch_streams
    std::string dtype = "float32";  // code2wav / vocoder only: the stage's dtype
    int chunk_frames = 0;           // > 0, vocoder only: the stage's chunk_frames
    std::string plugin_path;  // code2wav only; empty: <build>/lib/libomnirt_qwen3_omni_plugin.so
};

struct SpeechLevel {
    int concurrency = 0;
    int streams = 0;  // measured
    int failed = 0;
    double ttfa_p50_ms = 0;
    double ttfa_p99_ms = 0;
    double rtf_p50 = 0;  // per stream: wall / audio seconds
    double rtf_p99 = 0;
    double rtf_aggregate = 0;  // wall of the level / all audio seconds
    double compute_rtf = 0;    // code2wav only: stage compute / all audio seconds
    double frames_per_second = 0;
    double audio_seconds = 0;     // all measured audio
    double rows_per_forward = 0;  // code2wav only: mean batch rows of the chunks' forwards
    std::map<std::string, double> stage_ms;  // pipeline mode: compute ms per request per stage
};

// Vocoder only: one audio chunk of the last measured stream.
struct VocoderChunkCost {
    int index = 0;
    std::int64_t frames = 0;  // codec frames in the chunk
    double audio_end_s = 0;   // where the chunk ends in the utterance
    double ms = 0;            // since the previous chunk left (the first: since the start)
    double cpu_ms = 0;        // the process's CPU time over the same span (all its threads)
};

struct SpeechBenchReport {
    SpeechBenchOptions options;
    std::string cpu;  // /proc/cpuinfo "model name"
    std::vector<SpeechLevel> levels;
    std::vector<VocoderChunkCost> chunk_costs;  // vocoder only
    // Vocoder only: the process's CPU time over the measured streams (the stage is the only
    // thing running), and the host's 1-minute load average before and after them.
    double cpu_seconds = 0;
    double load_before = 0;
    double load_after = 0;
};

[[nodiscard]] Result<SpeechBenchReport> run_speech_bench(const SpeechBenchOptions& options);
[[nodiscard]] std::string format_speech_table(const SpeechBenchReport& report);
[[nodiscard]] std::string speech_report_json(const SpeechBenchReport& report);

}  // namespace omnirt::bench
