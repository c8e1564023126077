#pragma once
// One realtime session (docs/realtime.md): the client events of the OpenAI Realtime protocol
// in, server events out. It keeps the session configuration, the conversation, the input audio
// buffer with server voice activity detection, and at most one response at a time, which runs
// the pipeline on the conversation through a ResponseBackend.
//
// Thread safety: every public method may be called from any thread (one mutex; the backend's
// events arrive on the pipeline's threads). `send` is called with the session's lock held and
// must not block or call back into the session. The backend is never called with the lock
// held: its events take the lock, and a backend that holds its own lock while delivering one
// (the coordinator does) would otherwise deadlock against a cancel.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/output.h"
#include "serve/openai/chat_request.h"
#include "serve/realtime/conversation.h"
#include "serve/realtime/session_config.h"
#include "serve/realtime/voice_activity.h"

namespace omnirt::serve::realtime {

// Runs responses on the pipeline. `events` may arrive on any thread, also during start() or
// cancel(); after a failed start() they are not called.
class ResponseBackend {
  public:
    struct Events {
        std::function<void(const client::OutputDelta& delta)> delta;
        // Once: the final output, or the error that ended the response (also after cancel).
        std::function<void(const Result<client::FinalOutput>& end)> end;
    };
    virtual ~ResponseBackend() = default;
    [[nodiscard]] virtual Status start(const std::string& response_id,
                                       const openai::ChatRequest& request, Events events) = 0;
    virtual void cancel(const std::string& response_id, const std::string& reason) = 0;
};

struct SessionOptions {
    std::string model_name;
    SessionChoices choices;    // voices, whether server_vad is available
    VoiceActivityFactory vad;  // empty: no server_vad
    ItemLimits limits;
    bool beta = false;    // the client asked for the beta protocol (OpenAI-Beta header)
    std::string id_seed;  // makes this session's ids unique (e.g. a random hex string)
    // Input audio held before a commit (pcm16 bytes); appends beyond it are refused.
    std::size_t max_buffer_bytes = 15u << 20;
    std::size_t max_items = 4096;  // conversation items
};

class Session : public std::enable_shared_from_this<Session> {
  public:
    using Send = std::function<void(std::string event)>;
    Session(SessionOptions options, ResponseBackend& backend, Send send);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Sends session.created (with server_vad on when a detector is available).
    void open();
    // One client event (a WebSocket text message).
    void on_message(std::string_view text);
    // A binary message: the protocol has none, an error event answers it.
    void on_binary();
    // The connection ended: the response in progress is cancelled, nothing more is sent.
    void close();

    // Statistics for tests and the realtime benchmark.
    struct Stats {
        std::int64_t responses = 0;
        std::int64_t cancelled = 0;
        bool responding = false;
    };
    [[nodiscard]] Stats stats() const;

  private:
    struct Response;
    using Clock = std::chrono::steady_clock;

    // A start or cancel for the backend, queued under the lock and run after it is released.
    struct BackendCall {
        std::string id;
        std::optional<openai::ChatRequest> request;  // set: start; else cancel
        ResponseBackend::Events events;
        std::string reason;
    };
    void run_backend_calls(std::vector<BackendCall> calls);
    void handle_message(std::string_view text);
    void dispatch(const nlohmann::json& event, const std::string& event_id);
    void emit(nlohmann::json event);
    void error(const openai::ProtocolError& error, const std::string& event_id);
    [[nodiscard]] std::string next_id(std::string_view prefix);
    [[nodiscard]] std::string name(std::string_view ga) const;  // beta aliases

    // session.update / input audio (realtime_session.cpp)
    void update_session(const nlohmann::json& event, const std::string& event_id);
    void append_audio(const nlohmann::json& event, const std::string& event_id);
    void detect_voice(std::span<const std::int16_t> pcm);
    void commit_audio(std::size_t end_sample, const std::string& event_id);
    void clear_audio();
    void trim_idle_audio();
    // conversation.item.* (session_items.cpp)
    void create_item(const nlohmann::json& event, const std::string& event_id);
    void retrieve_item(const nlohmann::json& event, const std::string& event_id);
    void truncate_item(const nlohmann::json& event, const std::string& event_id);
    void delete_item(const nlohmann::json& event, const std::string& event_id);
    void add_item(Item item, const std::optional<std::string>& previous_item_id);
    // The event's item_id when the conversation has it; otherwise an error event and nullopt.
    std::optional<std::string> existing_item_id(const nlohmann::json& event,
                                                const std::string& event_id);
    // responses (session_response.cpp)
    void create_response(const nlohmann::json& params, const std::string& event_id);
    void on_delta(const std::string& response_id, const client::OutputDelta& delta);
    void handle_delta(const std::string& response_id, const client::OutputDelta& delta);
    void on_end(const std::string& response_id, const Result<client::FinalOutput>& end);
    void start_output_item();
    void finish_output_item(const std::string& status);
    void finish_response(const std::string& status, nlohmann::json status_details,
                         const client::TokenUsage& usage);
    void cancel_response(const std::string& reason);

    SessionOptions options_;
    ResponseBackend& backend_;
    Send send_;
    mutable std::recursive_mutex mutex_;
    bool closed_ = false;
    SessionConfig config_;
    Conversation conversation_;
    std::unique_ptr<VoiceActivity> vad_;
    std::uint64_t counter_ = 0;
    // Input audio: samples since the last commit / clear, and where they start in all audio
    // appended this session (in samples at 24 kHz).
    std::vector<std::int16_t> buffer_;
    std::int64_t buffer_start_ = 0;
    std::int64_t vad_origin_ = 0;         // session position of the detector's sample 0
    std::optional<std::int64_t> speech_;  // session position where speech started
    std::string speech_item_id_;          // the item the speech will become
    std::unique_ptr<Response> response_;
    std::vector<BackendCall> backend_calls_;
    Stats stats_;
};

}  // namespace omnirt::serve::realtime
