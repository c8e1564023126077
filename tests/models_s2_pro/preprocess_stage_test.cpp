// s2_pro.preprocess over a generated checkpoint: the text and reference clips of a request (codes
// as a tensor or JSON lists, audio as samples at any rate or an encoded WAV) become the prompt of
// prompt.h with the clips' codes (audio through the codec encoder: the same codes as encoding the
// 44.1 kHz mono samples directly); malformed references fail naming the field.
#include "models/s2_pro/preprocess_stage.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "media/audio.h"
#include "models/s2_pro/codec_encoder.h"
#include "models/s2_pro/make_checkpoint.h"
#include "models/s2_pro/prompt.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {
namespace {

namespace fs = std::filesystem;

class S2ProPreprocessStageTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        directory_ = new fs::path(fs::temp_directory_path() /
                                  ("omnirt_s2_pro_preprocess_" + std::to_string(::getpid())));
        fs::remove_all(*directory_);
        ASSERT_TRUE(make_checkpoint(*directory_, {.preset = "tiny", .seed = 4}).has_value());
    }
    static void TearDownTestSuite() {
        fs::remove_all(*directory_);
        delete directory_;
    }
    void SetUp() override {
        Registry registry;
        ASSERT_TRUE(register_preprocess_stage(registry).has_value());
        auto stage = make_preprocess_stage(pipeline::StageContext{
            .stage_name = "preprocess", .args = Map{{"model_path", Value(directory_->string())}}});
        ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
        stage_ = std::move(*stage);
        ASSERT_TRUE(stage_->start().has_value());
    }
    void TearDown() override { stage_->stop(); }

    Result<Value> run(Value inputs) {
        const std::string id = "r" + std::to_string(next_++);
        EXPECT_TRUE(stage_->inbox().push(pipeline::IncomingMessage{
            .request_id = id,
            .kind = pipeline::IncomingKind::new_request,
            .payload = std::make_shared<const StagePayload>(StagePayload{
                .request_id = id, .request = OmniRequest{.inputs = std::move(inputs)}})}));
        auto message =
            stage_->outbox().pop_until(std::chrono::steady_clock::now() + std::chrono::minutes(2));
        OMNI_CHECK(message.has_value(), "timed out");
        if (message->kind == pipeline::OutgoingKind::error) return fail(message->error);
        return message->result->data;
    }

    static std::vector<std::int64_t> ints(const Value& data, const char* key) {
        const Tensor* tensor = data.find(key)->if_tensor();
        const at::Tensor values = torch_bridge::to_torch(*tensor).to(at::kLong);
        return std::vector<std::int64_t>(values.data_ptr<std::int64_t>(),
                                         values.data_ptr<std::int64_t>() + values.numel());
    }

    static fs::path* directory_;
    std::unique_ptr<pipeline::Scheduler> stage_;
    int next_ = 0;
};

fs::path* S2ProPreprocessStageTest::directory_ = nullptr;

TEST_F(S2ProPreprocessStageTest, TextAndCodesGiveThePromptBuildersIds) {
    List rows;
    std::vector<std::int32_t> flat;
    for (int k = 0; k < 10; ++k) {
        List row;
        for (int t = 0; t < 3; ++t) {
            row.push_back(Value(k * 50 + t));
            flat.push_back(k * 50 + t);
        }
        rows.push_back(Value(std::move(row)));
    }
    auto data = run(Value(Map{
        {"text", Value("Say it.")},
        {"references",
         Value(List{Value(Map{{"text", Value("Ref.")}, {"vq_codes", Value(std::move(rows))}})})}}));
    ASSERT_TRUE(data.has_value()) << data.error().to_string();

    auto tokenizer = text::Tokenizer::from_file((*directory_ / "tokenizer.json").string());
    auto config = parse_s2_pro_config(nlohmann::json(*s2_pro_preset("tiny", "bfloat16")));
    auto expected =
        build_prompt(**tokenizer, *config, "Say it.",
                     {{.text = "Ref.", .codes = {.codebooks = 10, .frames = 3, .codes = flat}}});
    ASSERT_TRUE(expected.has_value());
    EXPECT_EQ(ints(*data, "input_ids"),
              std::vector<std::int64_t>(expected->ids.begin(), expected->ids.end()));
    EXPECT_EQ(ints(*data, "vq_positions"), expected->vq_positions);
    EXPECT_EQ(ints(*data, "vq_codes"),
              std::vector<std::int64_t>(expected->vq_codes.begin(), expected->vq_codes.end()));
}

TEST_F(S2ProPreprocessStageTest, ReferenceAudioIsEncodedAtFortyFourKilohertzMono) {
    at::manual_seed(1);
    const at::Tensor clip = 0.2 * at::randn({5000}, at::kFloat);
    auto encoder = CodecEncoder::open(*directory_);
    ASSERT_TRUE(encoder.has_value());
    auto codes = (*encoder)->encode(clip);
    ASSERT_TRUE(codes.has_value());
    std::vector<std::int64_t> expected;
    const at::Tensor by_frame = codes->select(0, 0).t().contiguous();  // [frames, 10]
    expected.assign(by_frame.data_ptr<std::int64_t>(),
                    by_frame.data_ptr<std::int64_t>() + by_frame.numel());

    // Samples at 44.1 kHz; the same samples as two identical channels.
    for (const at::Tensor& audio : {clip, at::stack({clip, clip})}) {
        auto data = run(Value(Map{
            {"text", Value("Hi")},
            {"references",
             Value(List{Value(Map{{"text", Value("Ref")},
                                  {"audio", Value(*torch_bridge::from_torch(audio.contiguous()))},
                                  {"sample_rate", Value(44100)}})})}}));
        ASSERT_TRUE(data.has_value()) << data.error().to_string();
        EXPECT_EQ(ints(*data, "vq_codes"), expected);
        EXPECT_EQ(ints(*data, "vq_positions").size(), 3u);  // ceil(5000 / 2048)
    }
    // An encoded WAV at 16 kHz: decoded, resampled, encoded (frames of the resampled length).
    media::AudioBuffer low{.sample_rate = 16000, .channels = 1, .samples = {}};
    for (int i = 0; i < 8000; ++i) low.samples.push_back(0.1f * static_cast<float>(i % 50) / 50);
    auto wav = media::encode_audio(low, media::AudioFormat::wav);
    ASSERT_TRUE(wav.has_value());
    Bytes bytes{.data = std::vector<std::uint8_t>(wav->begin(), wav->end())};
    auto data = run(
        Value(Map{{"text", Value("Hi")},
                  {"references", Value(List{Value(Map{{"audio", Value(std::move(bytes))}})})}}));
    ASSERT_TRUE(data.has_value()) << data.error().to_string();
    EXPECT_EQ(ints(*data, "vq_positions").size(), 11u);  // 22050 samples -> ceil(/2048)
}

TEST_F(S2ProPreprocessStageTest, MalformedInputsFailNamingTheField) {
    struct Bad {
        Value inputs;
        std::string field;
    };
    const std::vector<Bad> cases = {
        {Value(Map{}), "inputs.text"},
        {Value(Map{{"text", Value("x")}, {"references", Value("no")}}), "inputs.references"},
        {Value(Map{{"text", Value("x")}, {"references", Value(List{Value(3)})}}),
         "inputs.references[0]"},
        {Value(Map{{"text", Value("x")},
                   {"references", Value(List{Value(Map{{"vq_codes", Value(List{Value(1)})}})})}}),
         "inputs.references[0].vq_codes"},
        {Value(Map{{"text", Value("x")},
                   {"references", Value(List{Value(Map{{"audio", Value("not audio")}})})}}),
         "inputs.references[0].audio"},
        {Value(Map{
             {"text", Value("x")},
             {"references", Value(List{Value(Map{{"audio", Value(Bytes{.data = {1, 2, 3}})}})})}}),
         "inputs.references[0].audio"},
    };
    for (const Bad& bad : cases) {
        auto data = run(bad.inputs);
        ASSERT_FALSE(data.has_value()) << bad.field;
        EXPECT_EQ(data.error().code, ErrorCode::invalid_argument) << bad.field;
        EXPECT_NE(data.error().message.find(bad.field), std::string::npos) << data.error().message;
    }
}

}  // namespace
}  // namespace omnirt::models::s2_pro
