// s2_pro.vocoder over a generated checkpoint's codec: frames streamed one by one (as s2_pro.tts
// streams them) or several per chunk come out as audio chunks of first_chunk_frames, then twice
// as many each chunk up to chunk_frames frames, the remainder at the end; together they equal one
// decode of all frames; requests interleave independently; a malformed chunk fails its request
// only.
#include "models/s2_pro/vocoder_stage.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "models/s2_pro/codec_decoder.h"
#include "models/s2_pro/make_checkpoint.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {
namespace {

namespace fs = std::filesystem;

Tensor omni(const at::Tensor& tensor) {
    auto converted = torch_bridge::from_torch(tensor.contiguous());
    OMNI_CHECK(converted.has_value(), "from_torch");
    return *converted;
}

at::Tensor codes_of(std::int64_t frames, std::uint64_t seed) {
    at::manual_seed(seed);
    at::Tensor codes = at::randint(1024, {frames, 10}, at::kInt);
    codes.select(1, 0).copy_(at::randint(4096, {frames}, at::kInt));
    return codes;
}

class S2ProVocoderStageTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        directory_ = new fs::path(fs::temp_directory_path() /
                                  ("omnirt_s2_pro_vocoder_" + std::to_string(::getpid())));
        fs::remove_all(*directory_);
        ASSERT_TRUE(make_checkpoint(*directory_, {.preset = "tiny", .seed = 2}).has_value());
    }
    static void TearDownTestSuite() {
        fs::remove_all(*directory_);
        delete directory_;
    }
    void SetUp() override {
        Registry registry;
        ASSERT_TRUE(register_vocoder_stage(registry).has_value());
        ASSERT_TRUE(register_vocoder_stage(registry).has_value());  // idempotent
        auto stage = make_vocoder_stage(
            pipeline::StageContext{.stage_name = "vocoder",
                                   .args = Map{{"model_path", Value(directory_->string())},
                                               {"first_chunk_frames", Value(1)},
                                               {"chunk_frames", Value(4)}},
                                   .stream_sources = {"tts"},
                                   .terminal = true});
        ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
        stage_ = std::move(*stage);
        ASSERT_TRUE(stage_->start().has_value());
    }
    void TearDown() override { stage_->stop(); }

    void push_chunk(const std::string& id, std::int64_t chunk_id, const at::Tensor& codes) {
        ASSERT_TRUE(stage_->inbox().push(pipeline::IncomingMessage{
            .request_id = id,
            .kind = pipeline::IncomingKind::stream_chunk,
            .chunk = std::make_shared<const pipeline::StreamChunk>(pipeline::StreamChunk{
                .chunk_id = chunk_id, .chunk = Value(Map{{"codes", Value(omni(codes))}})}),
            .from_stage = "tts"}));
    }
    void push_end(const std::string& id) {
        ASSERT_TRUE(stage_->inbox().push(pipeline::IncomingMessage{
            .request_id = id, .kind = pipeline::IncomingKind::stream_done, .from_stage = "tts"}));
        ASSERT_TRUE(stage_->inbox().push(pipeline::IncomingMessage{
            .request_id = id,
            .kind = pipeline::IncomingKind::new_request,
            .payload = std::make_shared<const StagePayload>(
                StagePayload{.request_id = id, .data = Value(Map{{"usage", usage()}})})}));
    }

    static Value usage() {
        return Value(Map{{"prompt_tokens", Value(9)}, {"completion_tokens", Value(3)}});
    }

    struct Finished {
        std::vector<at::Tensor> audio;
        std::optional<pipeline::OutgoingMessage> last;
    };
    std::map<std::string, Finished> collect(std::size_t requests) {
        std::map<std::string, Finished> out;
        std::size_t done = 0;
        while (done < requests) {
            auto message = stage_->outbox().pop_until(std::chrono::steady_clock::now() +
                                                      std::chrono::minutes(2));
            OMNI_CHECK(message.has_value(), "timed out waiting for the vocoder");
            Finished& finished = out[message->request_id];
            if (message->kind == pipeline::OutgoingKind::stream) {
                EXPECT_EQ(message->chunk->chunk.find("sample_rate")->as_int(), 44100);
                finished.audio.push_back(
                    torch_bridge::to_torch(*message->chunk->chunk.find("audio")->if_tensor())
                        .clone());
            } else {
                finished.last = std::move(*message);
                ++done;
            }
        }
        return out;
    }

    static at::Tensor whole(const at::Tensor& codes) {
        auto codec = CodecDecoder::open(*directory_);
        OMNI_CHECK(codec.has_value(), "codec");
        auto audio = (*codec)->decode(codes.t().unsqueeze(0).to(at::kLong));
        OMNI_CHECK(audio.has_value(), "decode");
        return audio->select(0, 0);
    }

    static fs::path* directory_;
    std::unique_ptr<pipeline::Scheduler> stage_;
};

fs::path* S2ProVocoderStageTest::directory_ = nullptr;

TEST_F(S2ProVocoderStageTest, StreamedChunksEqualOneDecodeOfAllFrames) {
    const at::Tensor a = codes_of(12, 1), b = codes_of(5, 2);
    // Frames one by one for "a" as the engine streams them ([11]: the semantic token first), two
    // at a time for "b" ([2, 10]), interleaved.
    for (std::int64_t f = 0; f < 12; ++f) {
        push_chunk("a", f, at::cat({a[f].narrow(0, 0, 1) + 151678, a[f]}));
        if (f < 5 && f % 2 == 0)
            push_chunk("b", f / 2, b.narrow(0, f, std::min<std::int64_t>(2, 5 - f)));
    }
    push_end("a");
    push_end("b");
    auto out = collect(2);
    // a: 1, then twice as many up to chunk_frames: 2, 4, 4, then the last 1 frame.
    const std::vector<std::int64_t> frames = {1, 2, 4, 4, 1};
    ASSERT_EQ(out["a"].audio.size(), frames.size());
    for (std::size_t i = 0; i < frames.size(); ++i) {
        EXPECT_EQ(out["a"].audio[i].size(0), frames[i] * 2048) << "chunk " << i;
    }
    for (const char* id : {"a", "b"}) {
        ASSERT_TRUE(out[id].last.has_value());
        ASSERT_EQ(out[id].last->kind, pipeline::OutgoingKind::result)
            << out[id].last->error.to_string();
        const at::Tensor streamed = at::cat(out[id].audio);
        const at::Tensor expected = whole(std::string(id) == "a" ? a : b);
        EXPECT_EQ(streamed.size(0), expected.size(0));
        EXPECT_TRUE(at::allclose(streamed, expected, 1e-5, 1e-5))
            << id << ": " << (streamed - expected).abs().max().item<float>();
        const Value& data = out[id].last->result->data;
        EXPECT_EQ(data.find("samples")->as_int(), expected.size(0));
        EXPECT_EQ(data.find("frames")->as_int(), std::string(id) == "a" ? 12 : 5);
        ASSERT_NE(data.find("usage"), nullptr);
        EXPECT_EQ(*data.find("usage"), usage());
    }
}

TEST_F(S2ProVocoderStageTest, MalformedChunkFailsItsRequestOnly) {
    push_chunk("bad", 0, at::zeros({9}, at::kInt));
    push_end("bad");
    push_chunk("good", 0, codes_of(2, 3));
    push_end("good");
    auto out = collect(2);
    ASSERT_TRUE(out["bad"].last.has_value());
    EXPECT_EQ(out["bad"].last->kind, pipeline::OutgoingKind::error);
    EXPECT_EQ(out["bad"].last->error.code, ErrorCode::invalid_argument);
    EXPECT_NE(out["bad"].last->error.message.find("'codes'"), std::string::npos);
    ASSERT_TRUE(out["good"].last.has_value());
    EXPECT_EQ(out["good"].last->kind, pipeline::OutgoingKind::result);
}

TEST(S2ProVocoderStageArgsTest, MissingCodecOrModelPathFails) {
    auto none = make_vocoder_stage(pipeline::StageContext{.stage_name = "v", .args = Map{}});
    ASSERT_FALSE(none.has_value());
    EXPECT_NE(none.error().message.find("model_path"), std::string::npos);
    auto missing = make_vocoder_stage(pipeline::StageContext{
        .stage_name = "v", .args = Map{{"model_path", Value("/nonexistent/s2")}}});
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    auto format = make_vocoder_stage(
        pipeline::StageContext{.stage_name = "v", .args = Map{{"load_format", Value("pickle")}}});
    ASSERT_FALSE(format.has_value());
    EXPECT_NE(format.error().message.find("load_format"), std::string::npos);
    auto preset = make_vocoder_stage(pipeline::StageContext{
        .stage_name = "v",
        .args = Map{{"load_format", Value("dummy")}, {"codec_preset", Value("huge")}}});
    ASSERT_FALSE(preset.has_value());
    EXPECT_NE(preset.error().message.find("codec_preset"), std::string::npos);
}

// dtype: float32 (default) or bfloat16 (the codec's compute precision); anything else fails
// naming the arg.
TEST(S2ProVocoderStageArgsTest, DtypeIsFloat32OrBfloat16) {
    auto stage_of = [](const std::string& dtype) {
        return make_vocoder_stage(
            pipeline::StageContext{.stage_name = "v",
                                   .args = Map{{"load_format", Value("dummy")},
                                               {"codec_preset", Value("tiny")},
                                               {"dtype", Value(dtype)}},
                                   .stream_sources = {"tts"}});
    };
    auto bfloat = stage_of("bfloat16");
    EXPECT_TRUE(bfloat.has_value()) << bfloat.error().to_string();
    auto half = stage_of("float16");
    ASSERT_FALSE(half.has_value());
    EXPECT_EQ(half.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(half.error().message.find("'dtype'"), std::string::npos);
}

// load_format dummy (benchmarks): no model_path, seeded weights of a preset's codec sizes; the
// same seed gives the same audio, 2048 samples per frame.
TEST(S2ProVocoderStageArgsTest, DummyWeightsNeedNoCheckpoint) {
    std::vector<at::Tensor> audio;
    for (int run = 0; run < 2; ++run) {
        auto stage =
            make_vocoder_stage(pipeline::StageContext{.stage_name = "v",
                                                      .args = Map{{"load_format", Value("dummy")},
                                                                  {"codec_preset", Value("tiny")},
                                                                  {"dummy_seed", Value(3)}},
                                                      .stream_sources = {"tts"}});
        ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
        ASSERT_TRUE((*stage)->start().has_value());
        ASSERT_TRUE((*stage)->inbox().push(pipeline::IncomingMessage{
            .request_id = "r",
            .kind = pipeline::IncomingKind::stream_chunk,
            .chunk = std::make_shared<const pipeline::StreamChunk>(pipeline::StreamChunk{
                .chunk_id = 0, .chunk = Value(Map{{"codes", Value(omni(codes_of(6, 9)))}})}),
            .from_stage = "tts"}));
        ASSERT_TRUE((*stage)->inbox().push(pipeline::IncomingMessage{
            .request_id = "r", .kind = pipeline::IncomingKind::stream_done, .from_stage = "tts"}));
        ASSERT_TRUE((*stage)->inbox().push(
            pipeline::IncomingMessage{.request_id = "r",
                                      .kind = pipeline::IncomingKind::new_request,
                                      .payload = std::make_shared<const StagePayload>(
                                          StagePayload{.request_id = "r", .data = Value(Map{})})}));
        std::vector<at::Tensor> pieces;
        while (true) {
            auto message = (*stage)->outbox().pop();
            ASSERT_TRUE(message.has_value());
            if (message->kind != pipeline::OutgoingKind::stream) {
                EXPECT_EQ(message->kind, pipeline::OutgoingKind::result);
                break;
            }
            pieces.push_back(
                torch_bridge::to_torch(message->chunk->chunk.find("audio")->as_tensor()).clone());
        }
        (*stage)->stop();
        audio.push_back(at::cat(pieces));
    }
    EXPECT_EQ(audio[0].numel(), 6 * 2048);
    EXPECT_TRUE(at::equal(audio[0], audio[1]));
}

}  // namespace
}  // namespace omnirt::models::s2_pro
