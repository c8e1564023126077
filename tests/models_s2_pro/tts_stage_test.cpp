// s2_pro.tts over a generated checkpoint: the prompt builder's ids and reference codes in, frames
// out (streamed to the client when the stage has no stream targets, and in the result); dummy
// weights of the same seed give the same frames as the checkpoint; bad args and a checkpoint
// that does not match its config fail the factory with the reason.
#include "models/s2_pro/tts_stage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "engine/ar_scheduler.h"
#include "models/s2_pro/make_checkpoint.h"
#include "models/s2_pro/prompt.h"
#include "text/tokenizer.h"

namespace omnirt::models::s2_pro {
namespace {

namespace fs = std::filesystem;

class S2ProTtsStageTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        directory_ = new fs::path(fs::temp_directory_path() /
                                  ("omnirt_s2_pro_stage_" + std::to_string(::getpid())));
        fs::remove_all(*directory_);
        auto made =
            make_checkpoint(*directory_, {.preset = "tiny", .seed = 5, .dtype = DType::f32});
        ASSERT_TRUE(made.has_value()) << made.error().to_string();
    }
    static void TearDownTestSuite() {
        fs::remove_all(*directory_);
        delete directory_;
    }

    static Result<std::unique_ptr<pipeline::Scheduler>> make(Map extra) {
        Registry registry;
        EXPECT_TRUE(register_tts_stage(registry).has_value());
        EXPECT_TRUE(register_tts_stage(registry).has_value());  // idempotent
        auto factory = pipeline::find_stage_factory("s2_pro.tts", registry);
        EXPECT_TRUE(factory.has_value());
        Map args{{"model_path", Value(directory_->string())},
                 {"max_total_tokens", Value(1024)},
                 {"temperature", Value(0)},
                 {"depth_temperature", Value(0)}};
        for (auto& [key, value] : extra) args.insert_or_assign(key, value);
        return (*factory)(
            pipeline::StageContext{.stage_name = "tts", .args = std::move(args), .terminal = true});
    }

    // Runs one request; returns the result's codes [frames, 11] and the streamed chunk count.
    static std::pair<std::vector<std::int32_t>, std::size_t> generate(pipeline::Scheduler& stage,
                                                                      const S2ProPrompt& prompt) {
        Map data{{"input_ids", Value(Tensor::from_vector(prompt.ids))},
                 {"vq_positions", Value(Tensor::from_vector(prompt.vq_positions))},
                 {"vq_codes", Value(Tensor::from_vector(prompt.vq_codes))}};
        StagePayload payload{.request_id = "r",
                             .request = OmniRequest{.params = Value(Map{{"max_tokens", Value(4)}})},
                             .data = Value(std::move(data))};
        EXPECT_TRUE(stage.inbox().push(pipeline::IncomingMessage{
            .request_id = "r",
            .kind = pipeline::IncomingKind::new_request,
            .payload = std::make_shared<const StagePayload>(std::move(payload))}));
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
        std::size_t chunks = 0;
        while (auto message = stage.outbox().pop_until(deadline)) {
            if (message->kind == pipeline::OutgoingKind::stream) {
                EXPECT_FALSE(message->target.has_value());
                ++chunks;
                continue;
            }
            EXPECT_EQ(message->kind, pipeline::OutgoingKind::result) << message->error.to_string();
            if (message->kind != pipeline::OutgoingKind::result) break;
            const Tensor* codes = message->result->data.find("codes")->if_tensor();
            EXPECT_EQ(codes->shape()[1], 11);
            return {std::vector<std::int32_t>(codes->data_as<std::int32_t>(),
                                              codes->data_as<std::int32_t>() + codes->numel()),
                    chunks};
        }
        ADD_FAILURE() << "no result";
        return {};
    }

    static S2ProPrompt prompt() {
        auto tokenizer = text::Tokenizer::from_file((*directory_ / "tokenizer.json").string());
        OMNI_CHECK(tokenizer.has_value(), "tokenizer");
        auto config = parse_s2_pro_config(nlohmann::json(*s2_pro_preset("tiny", "float32")));
        CodeMatrix codes{.codebooks = 10, .frames = 2, .codes = {}};
        for (std::int32_t i = 0; i < 20; ++i) codes.codes.push_back(i * 37 % 1024);
        auto built = build_prompt(**tokenizer, *config, "Hello there.",
                                  {{.text = "A reference.", .codes = codes}});
        OMNI_CHECK(built.has_value(), "prompt");
        return *built;
    }

    static fs::path* directory_;
};

fs::path* S2ProTtsStageTest::directory_ = nullptr;

TEST_F(S2ProTtsStageTest, CheckpointAndDummyWeightsOfTheSameSeedGiveTheSameFrames) {
    auto stage = make({});
    ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
    ASSERT_TRUE((*stage)->start().has_value());
    auto [codes, chunks] = generate(**stage, prompt());
    (*stage)->stop();
    ASSERT_FALSE(codes.empty());
    EXPECT_EQ(chunks, codes.size() / 11);  // one client chunk per frame

    auto dummy = make({{"load_format", Value("dummy")}, {"dummy_seed", Value(5)}});
    ASSERT_TRUE(dummy.has_value()) << dummy.error().to_string();
    ASSERT_TRUE((*dummy)->start().has_value());
    auto [dummy_codes, dummy_chunks] = generate(**dummy, prompt());
    (*dummy)->stop();
    EXPECT_EQ(dummy_codes, codes);
}

TEST_F(S2ProTtsStageTest, BfloatSixteenStageGeneratesConstrainedFrames) {
    auto stage = make({{"dtype", Value("bfloat16")},
                       {"temperature", Value(0.8)},
                       {"depth_temperature", Value(0.8)},
                       {"seed", Value(4)}});
    ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
    ASSERT_TRUE((*stage)->start().has_value());
    auto [codes, chunks] = generate(**stage, prompt());
    (*stage)->stop();
    ASSERT_FALSE(codes.empty());
    for (std::size_t f = 0; f < codes.size() / 11; ++f) {
        const std::int32_t token = codes[f * 11];
        EXPECT_GE(token, 151678);
        EXPECT_LE(token, 155773);
        EXPECT_EQ(codes[f * 11 + 1], token - 151678);
        for (std::size_t k = 2; k < 11; ++k) {
            EXPECT_GE(codes[f * 11 + k], 0);
            EXPECT_LT(codes[f * 11 + k], 4096);
        }
    }
}

TEST_F(S2ProTtsStageTest, BadArgsFailWithTheReason) {
    auto no_path = make({{"model_path", Value("")}});
    ASSERT_FALSE(no_path.has_value());
    EXPECT_NE(no_path.error().message.find("model_path"), std::string::npos);
    auto dtype = make({{"dtype", Value("float16")}});
    ASSERT_FALSE(dtype.has_value());
    EXPECT_NE(dtype.error().message.find("dtype"), std::string::npos);
    auto format = make({{"load_format", Value("pickle")}});
    ASSERT_FALSE(format.has_value());
    EXPECT_NE(format.error().message.find("load_format"), std::string::npos);
    auto missing = make({{"model_path", Value((*directory_ / "nowhere").string())}});
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

TEST_F(S2ProTtsStageTest, CheckpointThatDoesNotMatchItsConfigIsRefusedByName) {
    const fs::path copy = *directory_ / "mismatch";
    fs::create_directories(copy);
    for (const auto& entry : fs::directory_iterator(*directory_)) {
        if (entry.is_regular_file()) fs::copy_file(entry.path(), copy / entry.path().filename());
    }
    nlohmann::json config;
    {
        std::ifstream in(copy / "config.json");
        config = nlohmann::json::parse(in);
    }
    config["audio_decoder_config"]["n_layer"] = 3;
    {
        std::ofstream out(copy / "config.json");
        out << config.dump(2);
    }
    auto stage = make({{"model_path", Value(copy.string())}});
    ASSERT_FALSE(stage.has_value());
    EXPECT_EQ(stage.error().code, ErrorCode::failed_precondition);
    EXPECT_NE(stage.error().message.find("audio_decoder.layers.2.attention.wqkv.weight"),
              std::string::npos)
        << stage.error().message;
    fs::remove_all(copy);
}

}  // namespace
}  // namespace omnirt::models::s2_pro
