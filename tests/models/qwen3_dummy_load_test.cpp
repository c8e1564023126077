// qwen3.thinker with `load_format: dummy`: only config.json is needed (no weights, no
// tokenizer when prompts come as data.input_ids); the weights are a function of dummy_seed, the
// same as a checkpoint make_checkpoint writes with that seed; unknown formats are refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/ar_scheduler.h"
#include "models/qwen3/make_checkpoint.h"
#include "models/qwen3/thinker_stage.h"

namespace omnirt::models::qwen3 {
namespace {

namespace fs = std::filesystem;

class Qwen3DummyLoadTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        directory_ = new fs::path(fs::path(::testing::TempDir()) /
                                  ("omnirt_dummy_load_" + std::to_string(::getpid())));
        fs::remove_all(*directory_);
        auto made = make_checkpoint(*directory_ / "made",
                                    {.preset = "tiny", .seed = 5, .dtype = DType::f32});
        ASSERT_TRUE(made.has_value()) << made.error().to_string();
        fs::create_directories(*directory_ / "config_only");
        fs::copy_file(*directory_ / "made" / "config.json",
                      *directory_ / "config_only" / "config.json");
    }
    static void TearDownTestSuite() {
        fs::remove_all(*directory_);
        delete directory_;
    }

    static Result<std::unique_ptr<pipeline::Scheduler>> make(const fs::path& path, Map extra) {
        Map args{{"model_path", Value(path.string())},
                 {"dtype", Value("float32")},
                 {"max_total_tokens", Value(1024)}};
        for (auto& [key, value] : extra) args.insert_or_assign(key, value);
        return make_thinker_stage(
            pipeline::StageContext{.stage_name = "thinker", .args = std::move(args)});
    }

    static std::unique_ptr<engine::ArScheduler> start(const fs::path& path, Map extra) {
        auto made = make(path, std::move(extra));
        EXPECT_TRUE(made.has_value()) << made.error().to_string();
        if (!made) return nullptr;
        std::unique_ptr<engine::ArScheduler> stage(
            dynamic_cast<engine::ArScheduler*>(made->release()));
        EXPECT_TRUE(stage->start().has_value());
        return stage;
    }

    static fs::path* directory_;
};

fs::path* Qwen3DummyLoadTest::directory_ = nullptr;

StagePayload payload(const std::string& id, Value inputs) {
    return StagePayload{
        .request_id = id,
        .request = {.params = Value(Map{{"max_tokens", Value(6)},
                                        {"sampling", Value(Map{{"temperature", Value(0)},
                                                               {"ignore_eos", Value(true)}})}})},
        .data = std::move(inputs)};
}

// The greedy output ids of one request, or its error.
Result<std::vector<std::int32_t>> generate(engine::ArScheduler& stage, StagePayload input) {
    const std::string id = input.request_id;
    OMNI_CHECK(stage.inbox().push(pipeline::IncomingMessage{
                   .request_id = id,
                   .kind = pipeline::IncomingKind::new_request,
                   .payload = std::make_shared<const StagePayload>(std::move(input))}),
               "inbox");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    while (true) {
        auto message = stage.outbox().pop_until(deadline);
        if (!message) return fail(ErrorCode::deadline_exceeded, "no answer");
        if (message->kind == pipeline::OutgoingKind::error) return fail(message->error);
        if (message->kind != pipeline::OutgoingKind::result) continue;
        const Tensor& ids = message->result->data.find("output_ids")->as_tensor();
        return std::vector<std::int32_t>(ids.data_as<std::int32_t>(),
                                         ids.data_as<std::int32_t>() + ids.numel());
    }
}

Value prompt_ids() {
    return Value(Map{{"input_ids", Value(Tensor::from_vector(std::vector<std::int32_t>{
                                       11, 300, 42, 7, 512, 99, 3, 250}))}});
}

TEST_F(Qwen3DummyLoadTest, ConfigAloneServesInputIdsAndTheSeedFixesTheWeights) {
    auto dummy = start(*directory_ / "config_only",
                       Map{{"load_format", Value("dummy")}, {"dummy_seed", Value(5)}});
    auto again = start(*directory_ / "config_only",
                       Map{{"load_format", Value("dummy")}, {"dummy_seed", Value(5)}});
    // make_checkpoint with seed 5 wrote the same values (std 0.02, float32) into its files.
    auto stored = start(*directory_ / "made", Map{});
    ASSERT_TRUE(dummy && again && stored);
    auto a = generate(*dummy, payload("a", prompt_ids()));
    auto b = generate(*again, payload("b", prompt_ids()));
    auto c = generate(*stored, payload("c", prompt_ids()));
    ASSERT_TRUE(a.has_value()) << a.error().to_string();
    ASSERT_TRUE(b && c);
    EXPECT_EQ(a->size(), 6u);
    EXPECT_EQ(*a, *b);
    EXPECT_EQ(*a, *c);

    // Without tokenizer.json a chat request cannot be tokenized: the error says what to send.
    auto chat = generate(*dummy, payload("chat", Value(Map{})));
    ASSERT_FALSE(chat.has_value());
    EXPECT_NE(chat.error().message.find("data.input_ids"), std::string::npos)
        << chat.error().message;
}

TEST_F(Qwen3DummyLoadTest, RefusesUnknownFormatsAndMissingFiles) {
    auto unknown = make(*directory_ / "made", Map{{"load_format", Value("pt")}});
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(unknown.error().message.find("load_format"), std::string::npos)
        << unknown.error().message;
    // The default format needs the weights; dummy needs config.json.
    auto no_weights = make(*directory_ / "config_only", Map{});
    ASSERT_FALSE(no_weights.has_value());
    EXPECT_EQ(no_weights.error().code, ErrorCode::not_found);
    auto no_config = make(*directory_ / "absent", Map{{"load_format", Value("dummy")}});
    ASSERT_FALSE(no_config.has_value());
    EXPECT_EQ(no_config.error().code, ErrorCode::not_found);
    EXPECT_NE(no_config.error().message.find("config.json"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::models::qwen3
