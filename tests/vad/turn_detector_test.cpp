// server_vad turn detection on the golden recordings (real model): events, options, input rates,
// chunking and hostile input.
#include "vad/turn_detector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "media/audio.h"
#include "vad_test_data.h"

namespace omnirt::vad {
namespace {

using Kind = VadEvent::Kind;

// The speech + 1.2 s silence + speech golden, with 1 s of silence after it so that the second
// turn ends inside the recording.
std::vector<std::int16_t> two_turns_16k() {
    auto pcm = testing::golden_recording("speech_silence_speech").pcm;
    pcm.resize(pcm.size() + 16000, 0);
    return pcm;
}

std::vector<std::int16_t> to_rate(const std::vector<std::int16_t>& pcm16k, int rate) {
    media::AudioBuffer buffer{.sample_rate = 16000, .channels = 1, .samples = {}};
    for (std::int16_t s : pcm16k) buffer.samples.push_back(static_cast<float>(s) / 32768.0f);
    auto resampled = media::resample(buffer, rate);
    EXPECT_TRUE(resampled) << resampled.error().to_string();
    std::vector<std::int16_t> out;
    for (float v : resampled->samples) {
        out.push_back(
            static_cast<std::int16_t>(std::lround(std::clamp(v * 32768.0f, -32768.0f, 32767.0f))));
    }
    return out;
}

TurnDetector make_detector(std::shared_ptr<const SileroModel> model, TurnDetectionOptions options,
                           int rate) {
    auto detector = TurnDetector::create(std::move(model), options, rate);
    EXPECT_TRUE(detector) << detector.error().to_string();
    return std::move(*detector);
}

std::vector<VadEvent> feed_in_pieces(TurnDetector& detector, const std::vector<std::int16_t>& pcm,
                                     const std::vector<std::size_t>& sizes) {
    std::vector<VadEvent> events;
    std::size_t offset = 0;
    for (std::size_t i = 0; offset < pcm.size(); ++i) {
        const std::size_t size = std::min(sizes[i % sizes.size()], pcm.size() - offset);
        for (const VadEvent& event :
             detector.feed(std::span<const std::int16_t>(pcm).subspan(offset, size))) {
            events.push_back(event);
        }
        offset += size;
    }
    return events;
}

std::string describe(const std::vector<VadEvent>& events) {
    std::string text;
    for (const VadEvent& e : events) {
        text += (e.kind == Kind::speech_started ? "started@" : "stopped@") +
                std::to_string(e.audio_ms) + " ";
    }
    return text;
}

TEST(TurnDetectorTest, SpeechSilenceSpeechGivesTwoTurnsAtPlausibleTimes) {
    OMNIRT_VAD_MODEL_OR_SKIP(model);
    auto detector = make_detector(model, {}, 16000);
    const auto pcm = two_turns_16k();
    const auto events = detector.feed(pcm);
    std::printf("16 kHz events: %s\n", describe(events).c_str());
    ASSERT_EQ(events.size(), 4u) << describe(events);
    EXPECT_EQ(events[0].kind, Kind::speech_started);
    EXPECT_EQ(events[1].kind, Kind::speech_stopped);
    EXPECT_EQ(events[2].kind, Kind::speech_started);
    EXPECT_EQ(events[3].kind, Kind::speech_stopped);
    // speech_a.wav: 0 .. 2367 ms (espeak-ng leaves ~60 ms of silence at the start and some at the
    // end); 1200 ms of silence; speech_b.wav: 3567 .. 5782 ms; then 1 s of silence.
    EXPECT_LE(events[0].audio_ms, 250);
    EXPECT_GE(events[1].audio_ms, 1600);
    EXPECT_LE(events[1].audio_ms, 2400);
    EXPECT_GE(events[2].audio_ms, 3500);
    EXPECT_LE(events[2].audio_ms, 3900);
    EXPECT_GE(events[3].audio_ms, 5000);
    EXPECT_LE(events[3].audio_ms, 5800);
    for (const VadEvent& e : events) EXPECT_EQ(e.audio_ms % 32, 0) << "window grid";
    // OpenAI's audio_start_ms includes prefix_padding_ms (300 by default).
    EXPECT_EQ(events[0].padded_start_ms, std::max<std::int64_t>(0, events[0].audio_ms - 300));
    EXPECT_EQ(events[2].padded_start_ms, events[2].audio_ms - 300);
    EXPECT_EQ(events[1].padded_start_ms, events[1].audio_ms);
    EXPECT_FALSE(detector.in_speech());
    EXPECT_EQ(detector.audio_ms(), static_cast<std::int64_t>(pcm.size()) / 16);
}

TEST(TurnDetectorTest, OptionsChangeTheTurns) {
    OMNIRT_VAD_MODEL_OR_SKIP(model);
    const auto pcm = two_turns_16k();
    // A silence longer than the pause merges the two turns into one (2 s more silence at the end
    // for it to end).
    auto patient = make_detector(model, {.silence_duration_ms = 2000}, 16000);
    auto longer = pcm;
    longer.resize(longer.size() + 32000, 0);
    const auto merged = patient.feed(longer);
    ASSERT_EQ(merged.size(), 2u) << describe(merged);
    EXPECT_EQ(merged[0].kind, Kind::speech_started);
    EXPECT_EQ(merged[1].kind, Kind::speech_stopped);
    EXPECT_GE(merged[1].audio_ms, 5000);

    // A short silence duration splits at the pauses inside the sentences too.
    auto hasty = make_detector(model, {.silence_duration_ms = 0}, 16000);
    EXPECT_GT(hasty.feed(pcm).size(), 4u);

    // prefix_padding_ms only moves padded_start_ms.
    auto unpadded = make_detector(model, {.prefix_padding_ms = 0}, 16000);
    auto padded = make_detector(model, {.prefix_padding_ms = 1000}, 16000);
    const auto a = unpadded.feed(pcm);
    const auto b = padded.feed(pcm);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(a.size(), 4u);
    EXPECT_EQ(a[2].audio_ms, b[2].audio_ms);
    EXPECT_EQ(a[2].padded_start_ms, a[2].audio_ms);
    EXPECT_EQ(b[2].padded_start_ms, b[2].audio_ms - 1000);

    // A threshold no window reaches: no turn at all.
    auto deaf = make_detector(model, {.threshold = 0.99999f}, 16000);
    EXPECT_TRUE(deaf.feed(pcm).empty());
}

TEST(TurnDetectorTest, TwentyFourKilohertzInputGivesTheSameTurns) {
    OMNIRT_VAD_MODEL_OR_SKIP(model);
    const auto pcm16 = two_turns_16k();
    auto reference = make_detector(model, {}, 16000);
    const auto expected = reference.feed(pcm16);
    // 24 and 48 kHz carry the whole band the network sees: the same turns within a window. 8 kHz
    // telephone audio has nothing above 4 kHz: the same turns, ends up to a few windows apart.
    for (int rate : {24000, 48000, 8000}) {
        SCOPED_TRACE(rate);
        const std::int64_t tolerance_ms = rate == 8000 ? 128 : 32;
        const auto pcm = to_rate(pcm16, rate);
        auto detector = make_detector(model, {}, rate);
        const auto events = detector.feed(pcm);
        std::printf("%d Hz events: %s\n", rate, describe(events).c_str());
        ASSERT_EQ(events.size(), expected.size()) << describe(events);
        for (std::size_t i = 0; i < events.size(); ++i) {
            EXPECT_EQ(events[i].kind, expected[i].kind);
            EXPECT_LE(std::abs(events[i].audio_ms - expected[i].audio_ms), tolerance_ms) << i;
        }
        EXPECT_EQ(detector.audio_ms(), static_cast<std::int64_t>(pcm.size()) * 1000 / rate);
    }
}

TEST(TurnDetectorTest, PiecesOfAnySizeGiveTheSameEventsAsOneCall) {
    OMNIRT_VAD_MODEL_OR_SKIP(model);
    const auto pcm16 = two_turns_16k();
    for (int rate : {16000, 24000}) {
        SCOPED_TRACE(rate);
        const auto pcm = rate == 16000 ? pcm16 : to_rate(pcm16, rate);
        auto whole = make_detector(model, {}, rate);
        const auto expected = whole.feed(pcm);
        ASSERT_EQ(expected.size(), 4u);
        for (const std::vector<std::size_t>& sizes :
             {std::vector<std::size_t>{1, 7, 333, 0, 1000, 4097}, std::vector<std::size_t>{480},
              std::vector<std::size_t>{511, 513, 2}}) {
            auto pieces = make_detector(model, {}, rate);
            EXPECT_EQ(feed_in_pieces(pieces, pcm, sizes), expected);
        }
    }
}

TEST(TurnDetectorTest, ResetForgetsTheTurnButKeepsTheClock) {
    OMNIRT_VAD_MODEL_OR_SKIP(model);
    const auto speech = testing::golden_recording("speech").pcm;
    auto detector = make_detector(model, {}, 24000);
    const auto pcm = to_rate(speech, 24000);
    // Half the utterance: a turn has started and not ended.
    const auto first = detector.feed(std::span<const std::int16_t>(pcm).first(pcm.size() / 2));
    ASSERT_EQ(first.size(), 1u) << describe(first);
    ASSERT_TRUE(detector.in_speech());
    const std::int64_t clock = detector.audio_ms();
    detector.reset();
    EXPECT_FALSE(detector.in_speech());
    EXPECT_EQ(detector.audio_ms(), clock);
    const auto again = detector.feed(pcm);
    ASSERT_FALSE(again.empty());
    EXPECT_EQ(again[0].kind, Kind::speech_started);
    // Same audio from a fresh state: the same onset, shifted by the clock.
    EXPECT_NEAR(static_cast<double>(again[0].audio_ms - clock),
                static_cast<double>(first[0].audio_ms), 1.0);
    EXPECT_GE(again[0].padded_start_ms, clock);
}

TEST(TurnDetectorTest, HostileInput) {
    OMNIRT_VAD_MODEL_OR_SKIP(model);
    auto detector = make_detector(model, {}, 24000);
    EXPECT_TRUE(detector.feed({}).empty());
    EXPECT_EQ(detector.audio_ms(), 0);
    // Full-scale square wave and extreme values: events or not, no crash, finite clock.
    std::vector<std::int16_t> loud(48000);
    for (std::size_t i = 0; i < loud.size(); ++i) loud[i] = i % 2 ? 32767 : -32768;
    (void)detector.feed(loud);
    EXPECT_EQ(detector.audio_ms(), 2000);

    EXPECT_FALSE(TurnDetector::create(nullptr, {}, 16000));
    for (int rate : {0, -16000, 7, 999, 1'000'000, 44101}) {
        auto bad = TurnDetector::create(model, {}, rate);
        ASSERT_FALSE(bad) << rate;
        EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
    }
    for (float threshold : {0.0f, 1.0f, -0.5f, std::numeric_limits<float>::quiet_NaN()}) {
        EXPECT_FALSE(TurnDetector::create(model, {.threshold = threshold}, 16000)) << threshold;
    }
    EXPECT_FALSE(TurnDetector::create(model, {.prefix_padding_ms = -1}, 16000));
    EXPECT_FALSE(TurnDetector::create(model, {.silence_duration_ms = -1}, 16000));
    EXPECT_TRUE(TurnDetector::create(model, {}, 44100));
}

}  // namespace
}  // namespace omnirt::vad
