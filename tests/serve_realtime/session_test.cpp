// realtime::Session against a fake backend and a scripted voice activity detector: server VAD
// turns (speech_started / stopped, the committed audio with its prefix padding, the automatic
// response), barge-in (speech during a response cancels it in the backend at once), the
// backend's events arriving during start / cancel, stale events after a cancel, failures,
// truncation of the played audio, and close.
#include <gtest/gtest.h>

#include <deque>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/realtime/realtime_session.h"

namespace omnirt::serve::realtime {
namespace {
using nlohmann::json;

// Speech wherever a sample's absolute value is >= 1000: starts and stops on exact samples,
// reported on the 24 kHz clock in ms (the real detector works on 32 ms windows).
class ScriptedVad final : public VoiceActivity {
  public:
    explicit ScriptedVad(std::int64_t silence_ms) : silence_ms_(silence_ms) {}
    std::vector<VoiceEvent> feed(std::span<const std::int16_t> pcm) override {
        std::vector<VoiceEvent> events;
        for (std::int16_t s : pcm) {
            const std::int64_t ms = position_ / 24;
            const bool loud = s >= 1000 || s <= -1000;
            if (loud) {
                quiet_since_.reset();
                if (!speaking_) {
                    speaking_ = true;
                    events.push_back({true, ms});
                }
            } else if (speaking_) {
                if (!quiet_since_) quiet_since_ = ms;
                if (ms - *quiet_since_ >= silence_ms_) {
                    speaking_ = false;
                    events.push_back({false, *quiet_since_});
                    quiet_since_.reset();
                }
            }
            ++position_;
        }
        return events;
    }
    void reset() override {
        speaking_ = false;
        quiet_since_.reset();
    }

  private:
    std::int64_t silence_ms_;
    std::int64_t position_ = 0;
    bool speaking_ = false;
    std::optional<std::int64_t> quiet_since_;
};

class FakeBackend final : public ResponseBackend {
  public:
    Status start(const std::string& id, const openai::ChatRequest& request,
                 Events events) override {
        if (refuse) return fail(ErrorCode::unavailable, "pipeline down");
        started.push_back(id);
        requests.push_back(request);
        this->events[id] = std::move(events);
        if (deliver_during_start) {
            this->events[id].delta(
                client::OutputDelta{.text = "early", .audio = {}, .logprobs = {}});
        }
        return {};
    }
    void cancel(const std::string& id, const std::string& reason) override {
        cancelled.push_back(id + ":" + reason);
        if (deliver_from_another_thread_in_cancel) {
            // A coordinator that waits for its delivery thread while cancelling: the session
            // must not hold its lock across cancel(), or this delivery could never run.
            auto delivered = std::make_shared<std::promise<void>>();
            auto future = delivered->get_future();
            std::thread([events = this->events.at(id), delivered] {
                events.delta(client::OutputDelta{.text = "stale", .audio = {}, .logprobs = {}});
                delivered->set_value();
            }).detach();
            EXPECT_EQ(future.wait_for(std::chrono::seconds(30)), std::future_status::ready)
                << "cancel() ran with the session's lock held";
        }
        // An engine that reports the abort at once, on the caller's thread.
        if (auto it = events.find(id); it != events.end()) {
            it->second.end(unexpected<Error>(Error{ErrorCode::aborted, "aborted"}));
        }
    }
    void text(const std::string& id, const std::string& text) {
        events.at(id).delta(client::OutputDelta{.text = text, .audio = {}, .logprobs = {}});
    }
    void audio(const std::string& id, std::size_t samples, int rate = 24000) {
        media::AudioBuffer buffer{
            .sample_rate = rate, .channels = 1, .samples = std::vector<float>(samples, 0.25f)};
        events.at(id).delta(client::OutputDelta{.text = "", .audio = buffer, .logprobs = {}});
    }
    void finish(const std::string& id, std::string reason = "stop") {
        client::FinalOutput out;
        out.finish_reason = std::move(reason);
        out.usage = {7, 3};
        events.at(id).end(out);
    }

    bool refuse = false;
    bool deliver_during_start = false;
    bool deliver_from_another_thread_in_cancel = false;
    std::vector<std::string> started;
    std::vector<openai::ChatRequest> requests;
    std::vector<std::string> cancelled;
    std::map<std::string, Events> events;
};

class SessionTest : public ::testing::Test {
  protected:
    void open(bool with_vad = true) {
        SessionOptions options;
        options.model_name = "m";
        options.choices.voices = {"ethan", "chelsie"};
        options.id_seed = "t_";
        if (with_vad) {
            options.vad = [](const TurnDetection& detection,
                             int rate) -> Result<std::unique_ptr<VoiceActivity>> {
                EXPECT_EQ(rate, 24000);
                return std::unique_ptr<VoiceActivity>(
                    std::make_unique<ScriptedVad>(detection.silence_duration_ms));
            };
        }
        session_ = std::make_shared<Session>(std::move(options), backend_, [this](std::string e) {
            sent_.push_back(json::parse(e));
        });
        session_->open();
        ASSERT_EQ(next("session.created")["session"]["audio"]["input"]["turn_detection"].is_null(),
                  !with_vad);
    }
    void send(const json& event) { session_->on_message(event.dump()); }
    // Pops events up to and including the first of `type`.
    json next(const std::string& type) {
        while (!sent_.empty()) {
            json event = sent_.front();
            sent_.pop_front();
            if (event["type"] == type) return event;
        }
        ADD_FAILURE() << "no " << type;
        return json::object();
    }
    bool has(const std::string& type) const {
        for (const auto& e : sent_) {
            if (e["type"] == type) return true;
        }
        return false;
    }
    static std::string pcm(std::size_t samples, std::int16_t value) {
        std::string bytes;
        for (std::size_t i = 0; i < samples; ++i) {
            bytes.push_back(static_cast<char>(value & 0xff));
            bytes.push_back(static_cast<char>((value >> 8) & 0xff));
        }
        static const char* kAlphabet =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        std::string out;
        for (std::size_t i = 0; i < bytes.size(); i += 3) {
            std::uint32_t n = static_cast<std::uint8_t>(bytes[i]) << 16;
            if (i + 1 < bytes.size()) n |= static_cast<std::uint8_t>(bytes[i + 1]) << 8;
            if (i + 2 < bytes.size()) n |= static_cast<std::uint8_t>(bytes[i + 2]);
            out += kAlphabet[(n >> 18) & 63];
            out += kAlphabet[(n >> 12) & 63];
            out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
            out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
        }
        return out;
    }
    void append(std::size_t samples, std::int16_t value) {
        send({{"type", "input_audio_buffer.append"}, {"audio", pcm(samples, value)}});
    }

    FakeBackend backend_;
    std::deque<json> sent_;
    std::shared_ptr<Session> session_;
};

TEST_F(SessionTest, AServerVadTurnCommitsThePaddedSpeechAndStartsAResponse) {
    open();
    append(24000, 0);     // 1 s of silence
    append(12000, 5000);  // 0.5 s of speech
    append(24000, 0);     // silence: stops after 500 ms
    auto started = next("input_audio_buffer.speech_started");
    EXPECT_EQ(started["audio_start_ms"], 1000);
    auto stopped = next("input_audio_buffer.speech_stopped");
    EXPECT_EQ(stopped["audio_end_ms"], 1500);
    EXPECT_EQ(stopped["item_id"], started["item_id"]);
    auto committed = next("input_audio_buffer.committed");
    EXPECT_EQ(committed["item_id"], started["item_id"]);
    next("conversation.item.added");
    next("response.created");
    ASSERT_EQ(backend_.requests.size(), 1u);
    // The committed audio: 300 ms of prefix padding + 500 ms of speech, as one audio part.
    send({{"type", "conversation.item.retrieve"}, {"item_id", committed["item_id"]}});
    auto item = next("conversation.item.retrieved")["item"];
    EXPECT_EQ(item["content"][0]["audio"].get<std::string>().size(), 4 * ((19200 * 2 + 2) / 3));
    const auto& parts = backend_.requests[0].messages.back().content;
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].type, openai::ContentPartType::audio);
    EXPECT_EQ(parts[0].media.mime, "audio/wav");
    EXPECT_EQ(parts[0].media.bytes.size(), 44u + 19200 * 2);
}

TEST_F(SessionTest, SpeechDuringAResponseCancelsItInTheBackend) {
    open();
    send({{"type", "conversation.item.create"},
          {"item", {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}});
    send({{"type", "response.create"}});
    const std::string id = next("response.created")["response"]["id"];
    backend_.text(id, "Hello");
    backend_.audio(id, 4800);
    append(2400, 5000);  // the user talks over it
    next("input_audio_buffer.speech_started");
    auto done = next("response.done");
    EXPECT_EQ(done["response"]["status"], "cancelled");
    EXPECT_EQ(done["response"]["status_details"]["reason"], "turn_detected");
    ASSERT_EQ(backend_.cancelled.size(), 1u);
    EXPECT_EQ(backend_.cancelled[0], id + ":turn_detected");
    EXPECT_FALSE(session_->stats().responding);
    // Late events of the cancelled response are dropped.
    backend_.text(id, " late");
    backend_.finish(id);
    EXPECT_FALSE(has("response.output_audio_transcript.delta"));
    EXPECT_FALSE(has("response.done"));
    // The barge-in turn becomes the next response.
    append(24000, 0);
    next("input_audio_buffer.committed");
    next("response.created");
    EXPECT_EQ(backend_.started.size(), 2u);
}

TEST_F(SessionTest, TheBackendIsNeverCalledWithTheSessionLocked) {
    open();
    send({{"type", "conversation.item.create"},
          {"item", {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}});
    send({{"type", "response.create"}});
    next("response.created");
    backend_.deliver_from_another_thread_in_cancel = true;
    append(2400, 5000);  // barge-in: cancel() from inside the append's handling
    EXPECT_EQ(next("response.done")["response"]["status"], "cancelled");
    EXPECT_FALSE(has("response.output_audio_transcript.delta"));  // the stale delta is dropped
}

TEST_F(SessionTest, TruncationKeepsThePlayedAudioAndTheSpokenPartOfTheTranscript) {
    open(false);
    send({{"type", "conversation.item.create"},
          {"item", {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}});
    send({{"type", "response.create"}});
    const std::string id = next("response.created")["response"]["id"];
    backend_.text(id, "one two three four");
    backend_.audio(id, 12000, 48000);  // 250 ms at 48 kHz -> 6000 samples at 24 kHz
    backend_.audio(id, 6000);
    backend_.finish(id);
    auto done = next("response.done");
    EXPECT_EQ(done["response"]["status"], "completed");
    EXPECT_EQ(done["response"]["usage"]["total_tokens"], 10);
    const std::string item = done["response"]["output"][0]["id"];
    send({{"type", "conversation.item.truncate"},
          {"item_id", item},
          {"content_index", 0},
          {"audio_end_ms", 250}});
    next("conversation.item.truncated");
    send({{"type", "conversation.item.retrieve"}, {"item_id", item}});
    auto retrieved = next("conversation.item.retrieved")["item"];
    EXPECT_EQ(retrieved["content"][0]["audio"].get<std::string>().size(), 4u * 6000 * 2 / 3);
    EXPECT_EQ(retrieved["content"][0]["transcript"], "one two");
    // The next response sees the truncated transcript as the assistant's words.
    send({{"type", "response.create"}});
    ASSERT_EQ(backend_.requests.size(), 2u);
    EXPECT_EQ(backend_.requests[1].messages.back().content[0].text, "one two");
}

TEST_F(SessionTest, EventsDuringStartAndFailuresAreHandled) {
    open(false);
    send({{"type", "conversation.item.create"},
          {"item", {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}});
    backend_.deliver_during_start = true;
    send({{"type", "response.create"}, {"response", {{"output_modalities", {"text"}}}}});
    EXPECT_EQ(next("response.output_text.delta")["delta"], "early");
    const std::string id = backend_.started.back();
    backend_.events.at(id).end(unexpected<Error>(Error{ErrorCode::internal, "stage crashed"}));
    auto done = next("response.done");
    EXPECT_EQ(done["response"]["status"], "failed");
    EXPECT_EQ(done["response"]["status_details"]["error"]["message"], "stage crashed");
    backend_.deliver_during_start = false;
    backend_.refuse = true;
    send({{"type", "response.create"}});
    EXPECT_EQ(next("response.done")["response"]["status"], "failed");
    EXPECT_FALSE(session_->stats().responding);
}

TEST_F(SessionTest, CloseCancelsTheResponseAndSendsNothingMore) {
    open(false);
    send({{"type", "conversation.item.create"},
          {"item", {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}});
    send({{"type", "response.create"}});
    next("response.created");
    sent_.clear();
    session_->close();
    EXPECT_EQ(backend_.cancelled.size(), 1u);
    EXPECT_TRUE(sent_.empty());
    send({{"type", "response.create"}});
    EXPECT_TRUE(sent_.empty());
}

TEST_F(SessionTest, SessionUpdateValidatesVoicesAndTurnDetection) {
    open();
    send({{"type", "session.update"},
          {"session", {{"audio", {{"output", {{"voice", "Chelsie"}}}}}}}});
    EXPECT_EQ(next("session.updated")["session"]["audio"]["output"]["voice"], "chelsie");
    send({{"type", "session.update"},
          {"event_id", "u2"},
          {"session", {{"audio", {{"output", {{"voice", "nobody"}}}}}}}});
    auto error = next("error")["error"];
    EXPECT_EQ(error["param"], "session.audio.output.voice");
    EXPECT_EQ(error["event_id"], "u2");
    send({{"type", "session.update"},
          {"session",
           {{"audio",
             {{"input", {{"turn_detection", {{"type", "server_vad"}, {"threshold", 1.5}}}}}}}}}});
    EXPECT_EQ(next("error")["error"]["param"], "session.audio.input.turn_detection.threshold");
    // Turn detection off: loud audio starts no turn.
    send({{"type", "session.update"},
          {"session", {{"audio", {{"input", {{"turn_detection", nullptr}}}}}}}});
    next("session.updated");
    append(24000, 5000);
    append(24000, 0);
    EXPECT_FALSE(has("input_audio_buffer.speech_started"));
}

}  // namespace
}  // namespace omnirt::serve::realtime
