#include "bench/realtime_bench.h"

#include <utility>  // before Boost's headers on GCC 12

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bench/relay_bench.h"
#include "client/client.h"
#include "config/load.h"
#include "media/audio.h"
#include "runner/builtins.h"
#include "runner/pipeline.h"
#include "serve/api/api_server.h"
#include "serve/openai/base64.h"
#include "serve/realtime/silero_voice_activity.h"

namespace omnirt::bench {
namespace {
namespace asio = boost::asio;
namespace websocket = boost::beast::websocket;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kRate = 24000;
constexpr std::size_t kChunk = kRate / 50;  // 20 ms per append
constexpr auto kWaitGuard = std::chrono::seconds(120);

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string base64(const std::int16_t* samples, std::size_t count) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(samples);
    return serve::openai::base64_encode(std::span(bytes, count * 2));
}

Result<std::vector<std::int16_t>> load_speech(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(ErrorCode::not_found, "cannot read the speech recording " + path);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    OMNI_TRY(media::AudioBuffer audio,
             media::decode_audio(std::as_bytes(std::span(bytes.data(), bytes.size())), {}));
    media::AudioBuffer mono{.sample_rate = audio.sample_rate, .channels = 1, .samples = {}};
    for (std::int64_t f = 0; f < audio.frames(); ++f) {
        float sum = 0;
        for (int c = 0; c < audio.channels; ++c) sum += audio.samples[f * audio.channels + c];
        mono.samples.push_back(sum / static_cast<float>(audio.channels));
    }
    if (mono.sample_rate != kRate) {
        OMNI_TRY(mono, media::resample(mono, kRate));
    }
    std::vector<std::int16_t> out;
    out.reserve(mono.samples.size());
    for (float s : mono.samples) {
        out.push_back(static_cast<std::int16_t>(std::clamp(s, -1.0f, 1.0f) * 32767.0f));
    }
    return out;
}

// What one session measured.
struct SessionResult {
    std::vector<double> answer_ms;
    std::vector<double> vad_lag_ms;
    std::vector<double> barge_ms;
    double audio_speed = std::numeric_limits<double>::infinity();
    std::string error;
};

// One client: a writer thread that plays the microphone, the caller's thread reads events.
class SessionClient {
  public:
    SessionClient(std::uint16_t port, const RealtimeBenchOptions& options,
                  const std::vector<std::int16_t>& speech, std::chrono::milliseconds start_delay)
        : options_(options), speech_(speech), start_delay_(start_delay), ws_(io_) {
        asio::ip::tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
        ws_.next_layer().connect(endpoint);
        ws_.handshake("127.0.0.1", "/v1/realtime");
    }

    SessionResult run() {
        json update = {{"type", "session.update"},
                       {"session",
                        {{"type", "realtime"},
                         {"output_modalities", {"audio"}},
                         {"audio",
                          {{"input",
                            {{"turn_detection",
                              {{"type", "server_vad"},
                               {"silence_duration_ms", options_.silence_duration_ms}}}}}}}}}};
        if (options_.max_output_tokens > 0) {
            update["session"]["max_output_tokens"] = options_.max_output_tokens;
        }
        if (!options_.stage_params.empty()) {
            update["session"]["stage_params"] = json::parse(options_.stage_params);
        }
        if (options_.max_talker_frames > 0) {
            update["session"]["stage_sampling"] = {
                {"talker", {{"max_tokens", options_.max_talker_frames}}}};
        }
        write(update.dump());
        std::thread writer([this] { play(); });
        read_events();
        writer.join();
        return std::move(result_);
    }

  private:
    void write(const std::string& text) {
        std::lock_guard lock(write_mutex_);
        ws_.text(true);
        ws_.write(asio::buffer(text));
    }

    // Sends `samples` as 20 ms appends at real time from `next`; returns when the last is sent.
    void send_audio(const std::int16_t* samples, std::size_t count, Clock::time_point& next) {
        for (std::size_t at = 0; at < count; at += kChunk) {
            std::this_thread::sleep_until(next);
            next += std::chrono::milliseconds(20);
            const std::size_t n = std::min(kChunk, count - at);
            write(json{{"type", "input_audio_buffer.append"}, {"audio", base64(samples + at, n)}}
                      .dump());
        }
    }

    // Silence until `done` holds (or the guard passes).
    template <class Pred>
    bool silence_until(Clock::time_point& next, Pred done) {
        static const std::vector<std::int16_t> quiet(kChunk, 0);
        const auto deadline = Clock::now() + kWaitGuard;
        for (;;) {
            {
                std::lock_guard lock(mutex_);
                if (done() || !result_.error.empty()) return done();
            }
            if (Clock::now() > deadline) return false;
            send_audio(quiet.data(), quiet.size(), next);
        }
    }

    void play() {
        auto next = Clock::now() + start_delay_;
        {
            std::lock_guard lock(mutex_);
            audio_start_ = next;
        }
        const std::vector<std::int16_t> trailing(
            static_cast<std::size_t>(options_.trailing_silence_ms) * kRate / 1000, 0);
        for (int turn = 0; turn <= options_.turns; ++turn) {
            const bool barge_turn = turn == options_.turns;
            send_audio(speech_.data(), speech_.size(), next);
            if (!barge_turn) {
                send_audio(trailing.data(), trailing.size(), next);
                if (!silence_until(next, [&] { return responses_done_ > turn; })) break;
                continue;
            }
            // Barge-in: speak again as soon as the answer's first audio arrives.
            if (!silence_until(next, [&] { return first_audio_seen_; })) break;
            {
                std::lock_guard lock(mutex_);
                barge_sent_ = Clock::now();
            }
            send_audio(speech_.data(), speech_.size(), next);
            // An answer that ended before the new speech was detected has nothing to cancel.
            silence_until(next, [&] { return cancelled_ || responses_done_ > turn; });
            break;
        }
        {
            std::lock_guard lock(mutex_);
            finished_ = true;
        }
        // Ends the reader's blocking read.
        boost::system::error_code ignored;
        ws_.next_layer().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    }

    void read_events() {
        const auto deadline = Clock::now() + kWaitGuard * (options_.turns + 2);
        while (Clock::now() < deadline) {
            boost::beast::flat_buffer buffer;
            boost::system::error_code ec;
            ws_.read(buffer, ec);
            if (ec) {
                std::lock_guard lock(mutex_);
                if (!finished_ && result_.error.empty()) result_.error = "socket: " + ec.message();
                return;
            }
            json event =
                json::parse(boost::beast::buffers_to_string(buffer.data()), nullptr, false);
            const std::string type = event.value("type", "");
            const auto now = Clock::now();
            std::lock_guard lock(mutex_);
            // The audio at session time m ms went out at audio_start_ + m (appends are paced).
            auto sent_at = [&](const char* field) {
                return audio_start_ + std::chrono::milliseconds(event.value(field, 0));
            };
            if (type == "input_audio_buffer.speech_started") {
                if (barge_sent_ && !barge_onset_) barge_onset_ = sent_at("audio_start_ms");
            } else if (type == "input_audio_buffer.speech_stopped") {
                stopped_ = now;
                if (!barge_sent_) {
                    result_.vad_lag_ms.push_back(ms_between(sent_at("audio_end_ms"), now) -
                                                 options_.silence_duration_ms);
                }
            } else if (type == "response.created") {
                first_audio_.reset();
                samples_ = 0;
            } else if (type == "response.output_audio.delta") {
                const std::size_t bytes = event.value("delta", std::string()).size() / 4 * 3;
                samples_ += bytes / 2;
                last_audio_ = now;
                if (!first_audio_) {
                    first_audio_ = now;
                    if (!barge_sent_ && !first_audio_seen_) {
                        result_.answer_ms.push_back(ms_between(stopped_, now));
                    }
                    if (responses_done_ == options_.turns) first_audio_seen_ = true;
                }
            } else if (type == "response.done") {
                const std::string status = event["response"].value("status", "");
                if (status == "cancelled" && barge_onset_) {
                    result_.barge_ms.push_back(ms_between(*barge_onset_, now));
                    cancelled_ = true;
                } else if (status != "completed" && status != "incomplete") {
                    result_.error = "response " + status + ": " + event["response"].dump();
                } else if (first_audio_ && last_audio_ > *first_audio_) {
                    const double seconds = static_cast<double>(samples_) / kRate;
                    result_.audio_speed = std::min(
                        result_.audio_speed,
                        seconds /
                            std::chrono::duration<double>(last_audio_ - *first_audio_).count());
                }
                ++responses_done_;
            } else if (type == "error") {
                result_.error = "error event: " + event.dump();
            }
            if (finished_ || !result_.error.empty()) return;
        }
        std::lock_guard lock(mutex_);
        result_.error = "the session did not finish within its guard";
    }

    const RealtimeBenchOptions& options_;
    const std::vector<std::int16_t>& speech_;
    const std::chrono::milliseconds start_delay_;  // staggers the sessions' turns
    asio::io_context io_;
    websocket::stream<asio::ip::tcp::socket> ws_;
    std::mutex write_mutex_;
    std::mutex mutex_;  // the fields below
    SessionResult result_;
    Clock::time_point audio_start_{};               // when the first append went out
    std::optional<Clock::time_point> barge_onset_;  // when the barge-in speech's onset went out
    Clock::time_point stopped_{};
    std::optional<Clock::time_point> first_audio_;
    Clock::time_point last_audio_{};
    std::optional<Clock::time_point> barge_sent_;
    std::size_t samples_ = 0;
    int responses_done_ = 0;
    bool first_audio_seen_ = false;  // of the barge-in turn's answer
    bool cancelled_ = false;
    bool finished_ = false;
};

}  // namespace

Result<RealtimeBenchReport> run_realtime_bench(const RealtimeBenchOptions& options) {
    if (options.sessions.empty() || options.turns < 1) {
        return fail(ErrorCode::invalid_argument, "bench realtime: needs sessions and turns >= 1");
    }
    for (int n : options.sessions) {
        if (n < 1 || n > 256) {
            return fail(ErrorCode::invalid_argument, "bench realtime: sessions must be in 1..256");
        }
    }
    if (!options.stage_params.empty() &&
        !json::parse(options.stage_params, nullptr, false).is_object()) {
        return fail(ErrorCode::invalid_argument,
                    "bench realtime: --stage-params must be a JSON object");
    }
    OMNI_TRY(auto speech, load_speech(options.audio_path));
    OMNI_TRY(auto vad, serve::realtime::silero_voice_activity(options.vad_model));
    OMNI_RETURN_IF_ERROR(runner::register_builtins());
    OMNI_TRY(config::PipelineConfig config,
             options.config_text.empty()
                 ? config::load_pipeline_file(options.config_path, {})
                 : config::load_pipeline_text(options.config_text, "<bench pipeline>", {}));
    OMNI_TRY(auto pipeline,
             runner::Pipeline::start(config, {.placement = runner::Placement::in_process}));
    client::Client client(pipeline->coordinator());
    serve::api::ApiServerOptions server_options{.model_name = config.resolved_name()};
    server_options.vad = vad;
    server_options.http.port = 0;
    OMNI_TRY(auto server, serve::api::ApiServer::create(std::move(server_options), client));
    OMNI_RETURN_IF_ERROR(server->start());

    RealtimeBenchReport report{.options = options, .cpu = cpu_model(), .levels = {}};
    for (int sessions : options.sessions) {
        std::vector<SessionResult> results(static_cast<std::size_t>(sessions));
        std::vector<std::thread> threads;
        // Independent speakers: the sessions' turns are spread evenly over one turn's length
        // (with --lockstep every session ends its turn at the same moment, the worst case).
        const auto turn_ms =
            static_cast<std::int64_t>(speech.size()) * 1000 / kRate + options.trailing_silence_ms;
        for (int i = 0; i < sessions; ++i) {
            const std::chrono::milliseconds delay(options.lockstep ? 0 : turn_ms * i / sessions);
            threads.emplace_back([&, i, delay] {
                try {
                    SessionClient session(server->port(), options, speech, delay);
                    results[static_cast<std::size_t>(i)] = session.run();
                } catch (const std::exception& e) {
                    results[static_cast<std::size_t>(i)].error = e.what();
                }
            });
        }
        for (auto& thread : threads) thread.join();
        RealtimeLevel level{.sessions = sessions};
        std::vector<double> answer, lag, barge;
        level.audio_speed_min = std::numeric_limits<double>::infinity();
        for (const auto& result : results) {
            if (!result.error.empty()) {
                ++level.failed;
                std::fprintf(stderr, "bench realtime: a session failed: %s\n",
                             result.error.c_str());
                continue;
            }
            answer.insert(answer.end(), result.answer_ms.begin(), result.answer_ms.end());
            lag.insert(lag.end(), result.vad_lag_ms.begin(), result.vad_lag_ms.end());
            barge.insert(barge.end(), result.barge_ms.begin(), result.barge_ms.end());
            level.audio_speed_min = std::min(level.audio_speed_min, result.audio_speed);
        }
        level.turns = static_cast<int>(answer.size());
        if (!answer.empty()) {
            level.answer_p50_ms = percentile(answer, 50);
            level.answer_p99_ms = percentile(answer, 99);
        }
        if (!lag.empty()) level.vad_lag_p50_ms = percentile(lag, 50);
        if (!barge.empty()) {
            level.barge_in_p50_ms = percentile(barge, 50);
            level.barge_in_p99_ms = percentile(barge, 99);
        }
        report.levels.push_back(level);
    }
    (void)server->drain(std::chrono::seconds(10));
    pipeline->stop();
    return report;
}

std::string format_realtime_table(const RealtimeBenchReport& report) {
    std::ostringstream out;
    out << "bench realtime  cpu: " << report.cpu << "\n";
    out << "sessions  turns  failed  answer p50 ms  answer p99 ms  vad lag p50 ms  "
           "audio speed min  barge-in p50 ms  barge-in p99 ms\n";
    char line[256];
    for (const auto& level : report.levels) {
        std::snprintf(line, sizeof(line),
                      "%8d  %5d  %6d  %13.1f  %13.1f  %14.1f  %15.2f  %15.1f  %15.1f\n",
                      level.sessions, level.turns, level.failed, level.answer_p50_ms,
                      level.answer_p99_ms, level.vad_lag_p50_ms, level.audio_speed_min,
                      level.barge_in_p50_ms, level.barge_in_p99_ms);
        out << line;
    }
    return out.str();
}

std::string realtime_report_json(const RealtimeBenchReport& report) {
    json levels = json::array();
    for (const auto& level : report.levels) {
        levels.push_back({{"sessions", level.sessions},
                          {"turns", level.turns},
                          {"failed", level.failed},
                          {"answer_p50_ms", level.answer_p50_ms},
                          {"answer_p99_ms", level.answer_p99_ms},
                          {"vad_lag_p50_ms", level.vad_lag_p50_ms},
                          {"audio_speed_min", level.audio_speed_min},
                          {"barge_in_p50_ms", level.barge_in_p50_ms},
                          {"barge_in_p99_ms", level.barge_in_p99_ms}});
    }
    return json{{"cpu", report.cpu},
                {"turns_per_session", report.options.turns},
                {"silence_duration_ms", report.options.silence_duration_ms},
                {"levels", levels}}
        .dump(2);
}

}  // namespace omnirt::bench
