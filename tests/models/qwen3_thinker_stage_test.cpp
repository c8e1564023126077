// qwen3.thinker end to end over a generated checkpoint: chat rendering and tokenization, the
// real Qwen3Model under the ArScheduler (greedy output equal to a plain full-recomputation loop
// over the model, alone, batched and from the prefix cache), streamed text, errors.
#include "models/qwen3/thinker_stage.h"

#include <ATen/ops/arange.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "engine/ar_scheduler.h"
#include "engine/kv_cache.h"
#include "models/qwen3/make_checkpoint.h"
#include "models/qwen3/prompt.h"
#include "models/qwen3/qwen3_model.h"
#include "text/tokenizer.h"

namespace omnirt::models::qwen3 {
namespace {

namespace fs = std::filesystem;

class Qwen3ThinkerStageTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        directory_ = new fs::path(fs::temp_directory_path() /
                                  ("omnirt_thinker_stage_" + std::to_string(::getpid())));
        fs::remove_all(*directory_);
        auto made = make_checkpoint(
            *directory_, {.preset = "tiny", .seed = 7, .dtype = DType::f32, .init_std = 0.15});
        ASSERT_TRUE(made.has_value()) << made.error().to_string();
    }
    static void TearDownTestSuite() {
        fs::remove_all(*directory_);
        delete directory_;
    }

    static pipeline::StageContext context(Map extra = {}) {
        Map args{{"model_path", Value(directory_->string())},
                 {"max_total_tokens", Value(4096)},
                 {"max_prefill_tokens", Value(64)}};
        for (auto& [key, value] : extra) args.insert_or_assign(key, value);
        return pipeline::StageContext{
            .stage_name = "thinker", .args = std::move(args), .terminal = true};
    }

    static std::unique_ptr<engine::ArScheduler> start_stage(Map extra = {}) {
        Registry registry;
        EXPECT_TRUE(register_qwen3_stages(registry).has_value());
        EXPECT_TRUE(register_qwen3_stages(registry).has_value());  // idempotent
        auto factory = pipeline::find_stage_factory("qwen3.thinker", registry);
        EXPECT_TRUE(factory.has_value());
        auto scheduler = (*factory)(context(std::move(extra)));
        EXPECT_TRUE(scheduler.has_value()) << scheduler.error().to_string();
        std::unique_ptr<engine::ArScheduler> stage(
            dynamic_cast<engine::ArScheduler*>(scheduler->release()));
        EXPECT_NE(stage, nullptr);
        EXPECT_TRUE(stage->start().has_value());
        return stage;
    }

    static std::shared_ptr<const text::Tokenizer> tokenizer() {
        auto loaded = text::Tokenizer::from_file((*directory_ / "tokenizer.json").string());
        OMNI_CHECK(loaded.has_value(), "tokenizer");
        return std::shared_ptr<const text::Tokenizer>(std::move(*loaded));
    }

    static OmniRequest chat(const std::string& text, std::int64_t max_tokens) {
        return OmniRequest{
            .inputs = Value(Map{
                {"messages", Value(List{Value(Map{
                                 {"role", Value("user")},
                                 {"content", Value(List{Value(Map{{"type", Value("text")},
                                                                  {"text", Value(text)}})})}})})}}),
            .params = Value(Map{{"max_tokens", Value(max_tokens)},
                                {"sampling", Value(Map{{"temperature", Value(0)}})}}),
            .metadata = Value(Map{{"api", Value("chat.completions")}})};
    }

    // Greedy tokens from the model alone: every step recomputes the whole sequence.
    static std::vector<std::int32_t> reference(std::vector<std::int32_t> tokens, std::int64_t count,
                                               const std::vector<std::int32_t>& eos) {
        auto checkpoint = checkpoint::Checkpoint::open(*directory_);
        EXPECT_TRUE(checkpoint.has_value());
        auto config = parse_qwen3_config((*checkpoint)->config());
        const checkpoint::Checkpoint& weights = **checkpoint;
        auto model = Qwen3Model::create(
            *config, [&](const std::string& name) { return weights.tensor(name); });
        EXPECT_TRUE(model.has_value());
        const std::int64_t block_size = 16;
        const std::int64_t blocks =
            (static_cast<std::int64_t>(tokens.size()) + count) / block_size + 1;
        auto cache = engine::KVCache::create((*model)->kv_spec(), blocks, block_size);
        std::vector<std::int32_t> table;
        for (std::int32_t b = 0; b < blocks; ++b) table.push_back(b);
        std::vector<std::int32_t> out;
        for (std::int64_t i = 0; i < count; ++i) {
            engine::SequenceInput input{
                .request_id = "ref", .tokens = tokens, .block_table = table};
            auto output =
                (*model)->forward(std::span<const engine::SequenceInput>(&input, 1), **cache);
            EXPECT_TRUE(output.has_value());
            const auto next =
                static_cast<std::int32_t>(output->logits[0].argmax().item<std::int64_t>());
            out.push_back(next);
            tokens.push_back(next);
            if (std::find(eos.begin(), eos.end(), next) != eos.end()) break;
        }
        return out;
    }

    static fs::path* directory_;
};

fs::path* Qwen3ThinkerStageTest::directory_ = nullptr;

struct Collected {
    std::map<std::string, std::string> streamed_text;
    std::map<std::string, StagePayload> results;
    std::map<std::string, Error> errors;
};

void submit(engine::ArScheduler& stage, const std::string& id, OmniRequest request, Map data = {}) {
    ASSERT_TRUE(stage.inbox().push(pipeline::IncomingMessage{
        .request_id = id,
        .kind = pipeline::IncomingKind::new_request,
        .payload = std::make_shared<const StagePayload>(StagePayload{
            .request_id = id, .request = std::move(request), .data = Value(std::move(data))})}));
}

void collect(engine::ArScheduler& stage, std::size_t count, Collected& out) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    std::size_t ended = 0;
    while (ended < count) {
        auto message = stage.outbox().pop_until(deadline);
        ASSERT_TRUE(message.has_value()) << "timed out";
        switch (message->kind) {
            case pipeline::OutgoingKind::stream:
                out.streamed_text[message->request_id] +=
                    message->chunk->chunk.find("text")->as_string();
                break;
            case pipeline::OutgoingKind::result:
                out.results.emplace(message->request_id, *message->result);
                ++ended;
                break;
            case pipeline::OutgoingKind::error:
                out.errors.emplace(message->request_id, message->error);
                ++ended;
                break;
        }
    }
}

std::vector<std::int32_t> output_ids(const StagePayload& result) {
    const Tensor& ids = result.data.find("output_ids")->as_tensor();
    return std::vector<std::int32_t>(ids.data_as<std::int32_t>(),
                                     ids.data_as<std::int32_t>() + ids.numel());
}

TEST_F(Qwen3ThinkerStageTest, ChatRequestsMatchTheModelAloneBatchedAndCached) {
    auto stage = start_stage();
    auto tok = tokenizer();
    const std::vector<std::string> texts = {
        "Hello there, how are you today?", "Tell me a story about a small robot.",
        "2 + 2 =", "Write three words about the sea, please, and nothing else at all."};
    const std::vector<std::int32_t> eos = {
        static_cast<std::int32_t>(*tok->token_to_id("<|im_end|>")),
        static_cast<std::int32_t>(*tok->token_to_id("<|endoftext|>"))};
    for (std::size_t i = 0; i < texts.size(); ++i) {
        submit(*stage, "c" + std::to_string(i), chat(texts[i], 12));
    }
    Collected collected;
    collect(*stage, texts.size(), collected);
    ASSERT_TRUE(collected.errors.empty()) << collected.errors.begin()->second.to_string();
    for (std::size_t i = 0; i < texts.size(); ++i) {
        const std::string id = "c" + std::to_string(i);
        const StagePayload& result = collected.results.at(id);
        auto prompt = qwen3_prompt_ids(chat(texts[i], 12), *tok, true, "t");
        ASSERT_TRUE(prompt.has_value());
        const auto ids = output_ids(result);
        EXPECT_EQ(ids, reference(*prompt, 12, eos)) << id;
        const Value* usage = result.data.find("usage");
        EXPECT_EQ(usage->find("prompt_tokens")->as_int(),
                  static_cast<std::int64_t>(prompt->size()));
        EXPECT_EQ(usage->find("completion_tokens")->as_int(),
                  static_cast<std::int64_t>(ids.size()));
        const std::string text = result.data.find("text")->as_string();
        EXPECT_EQ(collected.streamed_text[id], text);
        // The text is the tokenizer's decoding of the output without special tokens (a random
        // model also samples ids of the padded embedding that name no token: no text).
        std::vector<std::int32_t> known;
        for (std::int32_t id : ids) {
            if (tok->id_to_token(id)) known.push_back(id);
        }
        auto decoded = tok->decode(known, {.skip_special_tokens = true});
        ASSERT_TRUE(decoded.has_value());
        EXPECT_EQ(text, *decoded);
        const std::string reason = result.data.find("finish_reason")->as_string();
        EXPECT_TRUE(reason == "length" || reason == "stop") << reason;
    }

    // Again, one after the other: the rendered prompts now come from the prefix cache.
    const std::uint64_t hits_before = stage->stats().prefix_hit_tokens;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        submit(*stage, "again" + std::to_string(i), chat(texts[i], 12));
        Collected again;
        collect(*stage, 1, again);
        ASSERT_TRUE(again.errors.empty());
        EXPECT_EQ(output_ids(again.results.begin()->second),
                  output_ids(collected.results.at("c" + std::to_string(i))));
    }
    EXPECT_GT(stage->stats().prefix_hit_tokens, hits_before);

    // Token ids from a preprocessing stage skip the rendering.
    auto prompt = qwen3_prompt_ids(chat(texts[0], 5), *tok, true, "t");
    submit(*stage, "ids", chat(texts[0], 5),
           Map{{"input_ids", Value(Tensor::from_vector(*prompt))}});
    Collected by_ids;
    collect(*stage, 1, by_ids);
    ASSERT_EQ(by_ids.results.count("ids"), 1u);
    const auto first_five = output_ids(collected.results.at("c0"));
    EXPECT_EQ(output_ids(by_ids.results.at("ids")),
              std::vector<std::int32_t>(
                  first_five.begin(),
                  first_five.begin() + std::min<std::ptrdiff_t>(5, first_five.size())));
    stage->stop();
}

TEST_F(Qwen3ThinkerStageTest, PromptRendering) {
    auto tok = tokenizer();
    auto ids = qwen3_prompt_ids(chat("Hi", 1), *tok, false, "t");
    ASSERT_TRUE(ids.has_value());
    auto text = tok->decode(*ids);
    ASSERT_TRUE(text.has_value());
    EXPECT_EQ(*text,
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    OmniRequest raw{.inputs = Value(Map{{"prompt", Value("plain text")}})};
    auto plain = qwen3_prompt_ids(raw, *tok, true, "qwen3.thinker");
    ASSERT_TRUE(plain.has_value());
    EXPECT_EQ(*tok->decode(*plain), "plain text");

    OmniRequest image = chat("look", 1);
    image.inputs = Value(Map{
        {"messages",
         Value(List{Value(Map{{"role", Value("user")},
                              {"content", Value(List{Value(Map{{"type", Value("image")}})})}})})}});
    auto refused = qwen3_prompt_ids(image, *tok, true, "qwen3.thinker");
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::unimplemented);
    EXPECT_NE(refused.error().message.find("inputs.messages[0].content[0] is a 'image' part"),
              std::string::npos)
        << refused.error().message;
    OmniRequest nothing;
    auto missing = qwen3_prompt_ids(nothing, *tok, true, "qwen3.thinker");
    ASSERT_FALSE(missing.has_value());
    EXPECT_NE(missing.error().message.find("no inputs.messages or inputs.prompt"),
              std::string::npos);
    OmniRequest bad_role = chat("x", 1);
    bad_role.inputs = Value(Map{
        {"messages", Value(List{Value(Map{{"role", Value("robot")}, {"content", Value("x")}})})}});
    auto role = qwen3_prompt_ids(bad_role, *tok, true, "qwen3.thinker");
    ASSERT_FALSE(role.has_value());
    EXPECT_NE(role.error().message.find("inputs.messages[0].role"), std::string::npos);
}

TEST_F(Qwen3ThinkerStageTest, FactoryArgumentErrors) {
    Registry registry;
    ASSERT_TRUE(register_qwen3_stages(registry).has_value());
    auto factory = pipeline::find_stage_factory("qwen3.thinker", registry);
    ASSERT_TRUE(factory.has_value());
    pipeline::StageContext no_path{.stage_name = "thinker"};
    auto missing = (*factory)(no_path);
    ASSERT_FALSE(missing.has_value());
    EXPECT_NE(missing.error().message.find("arg 'model_path' is required"), std::string::npos);
    auto dtype = (*factory)(context({{"dtype", Value("int8")}}));
    ASSERT_FALSE(dtype.has_value());
    EXPECT_NE(dtype.error().message.find("arg 'dtype' must be float32, bfloat16 or float16"),
              std::string::npos);
    auto blocks = (*factory)(context({{"max_running_requests", Value(0)}}));
    ASSERT_FALSE(blocks.has_value());
    EXPECT_NE(blocks.error().message.find("'max_running_requests' must be positive"),
              std::string::npos);
    for (const Value& threads : {Value(-1), Value(5000), Value("two")}) {
        auto refused = (*factory)(context({{"num_threads", threads}}));
        ASSERT_FALSE(refused.has_value()) << threads.debug_string();
        EXPECT_NE(refused.error().message.find("num_threads"), std::string::npos)
            << refused.error().message;
    }
    auto nowhere = (*factory)(context({{"model_path", Value("/nonexistent/model")}}));
    ASSERT_FALSE(nowhere.has_value());
    EXPECT_EQ(nowhere.error().code, ErrorCode::not_found);

    // A media part fails its request, and the stage goes on.
    auto stage = start_stage();
    OmniRequest image = chat("look", 1);
    image.inputs = Value(Map{
        {"messages",
         Value(List{Value(Map{{"role", Value("user")},
                              {"content", Value(List{Value(Map{{"type", Value("audio")}})})}})})}});
    submit(*stage, "media", image);
    submit(*stage, "text", chat("fine", 2));
    Collected collected;
    collect(*stage, 2, collected);
    ASSERT_EQ(collected.errors.count("media"), 1u);
    EXPECT_EQ(collected.errors.at("media").code, ErrorCode::unimplemented);
    EXPECT_EQ(collected.results.count("text"), 1u);
    stage->stop();
}

}  // namespace
}  // namespace omnirt::models::qwen3
