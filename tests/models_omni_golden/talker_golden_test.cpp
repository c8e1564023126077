// The Qwen3-Omni talker stage (talker + code predictor on the AR engine, TalkerRole) against
// transformers' generate (greedy thinker, talker and code predictor) on the goldens' image prompt:
// the thinker's media hidden states at accept_hidden_layer come from our thinker, its tokens from
// the golden; the talker's frames must equal the codes transformers handed to code2wav. Also:
// the same request alone and in a batch of 8 gives the same frames.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "engine/ar_scheduler.h"
#include "models/qwen3_omni/rope_index.h"
#include "models/qwen3_omni/talker_config.h"
#include "models/qwen3_omni/talker_model.h"
#include "models/qwen3_omni/talker_stage.h"
#include "models/qwen3_omni/thinker_model.h"
#include "models_omni_golden/golden_support.h"
#include "pipeline/scheduler.h"

namespace omnirt::models::qwen3_omni {
namespace {

Tensor omni(const at::Tensor& tensor) {
    auto converted = torch_bridge::from_torch(tensor.contiguous());
    OMNI_CHECK(converted.has_value(), "from_torch");
    return *converted;
}

struct ThinkerRun {
    std::vector<std::int32_t> prompt;
    at::Tensor positions;  // [3, n] int64
    std::vector<std::int32_t> generated;
    at::Tensor media_hidden;  // [image rows, hidden] float32
    std::int64_t media_begin = 0;
};

// Our thinker on the golden prompt: positions, and the image rows' hidden states after
// accept_hidden_layer layers, before that layer's DeepStack addition (transformers v5).
ThinkerRun run_thinker(const Tiny& tiny, const Golden& golden, std::int64_t accept_layer) {
    ThinkerRun run;
    const at::Tensor ids = golden.get("generate.input_ids");
    const at::Tensor sequences = golden.get("generate.sequences");
    std::vector<std::int64_t> prompt(ids.data_ptr<std::int64_t>(),
                                     ids.data_ptr<std::int64_t>() + ids.size(0));
    for (std::int64_t id : prompt) run.prompt.push_back(static_cast<std::int32_t>(id));
    for (std::int64_t k = ids.size(0); k < sequences.size(0); ++k) {
        run.generated.push_back(static_cast<std::int32_t>(sequences[k].item<std::int64_t>()));
    }
    const at::Tensor grid = golden.get("inputs.image_grid")[0];
    MediaItems media;
    media.images.push_back(
        {grid[0].item<std::int64_t>(), grid[1].item<std::int64_t>(), grid[2].item<std::int64_t>()});
    auto rope = compute_rope_index(prompt, media);
    OMNI_CHECK(rope.has_value(), "rope");
    const auto n = static_cast<std::int64_t>(prompt.size());
    run.positions = at::empty({3, n}, at::kLong);
    for (std::int64_t axis = 0; axis < 3; ++axis) {
        for (std::int64_t row = 0; row < n; ++row) {
            run.positions[axis][row] = static_cast<std::int64_t>(rope->positions[axis][row]);
        }
    }
    std::vector<std::int64_t> image_rows;
    for (std::int64_t row = 0; row < n; ++row) {
        if (prompt[row] == tiny.config.ids.image) image_rows.push_back(row);
    }
    auto model = load_thinker(tiny.config, lookup_of(*tiny.checkpoint));
    OMNI_CHECK(model.has_value(), "thinker");
    auto cache = make_cache(**model);
    engine::SequenceInput input{.request_id = "a", .start_position = 0, .block_table = blocks()};
    input.tokens = run.prompt;
    input.embeddings =
        engine::RowValues{.rows = image_rows, .values = golden.get("visual_image.pooler_output")};
    for (int k = 0; k < 3; ++k) {
        input.layer_injections.push_back(
            {.after_layers = k + 1,
             .add = {
                 .rows = image_rows,
                 .values = golden.get("visual_image.deepstack_features." + std::to_string(k))}});
    }
    input.positions = run.positions;
    run.media_begin = image_rows.front();
    input.captures.push_back({.after_layers = static_cast<std::int32_t>(accept_layer),
                              .row_begin = image_rows.front(),
                              .row_end = image_rows.back() + 1});
    auto output = (*model)->forward(std::vector{input}, *cache);
    OMNI_CHECK(output.has_value(), "thinker forward");
    run.media_hidden = output->captures[0][0].to(at::kFloat).clone();
    if (accept_layer >= 1 && accept_layer <= 3) {
        run.media_hidden.sub_(
            golden.get("visual_image.deepstack_features." + std::to_string(accept_layer - 1)));
    }
    return run;
}

class TalkerStageGoldenTest : public ::testing::Test {
  protected:
    void SetUp() override {
        golden_ = Golden::open();
        if (!golden_ || !golden_->has("generate.code2wav_codes.0")) {
            GTEST_SKIP() << "no generate golden";
        }
        tiny_ = make_tiny();
        auto stage = make_talker_stage(pipeline::StageContext{
            .stage_name = "talker",
            .args = Map{{"model_path", Value(tiny_->directory.path().string())},
                        {"num_threads", Value(2)}},
            .next = {"code2wav"},
            .stream_to = {"code2wav"},
            .stream_sources = {"thinker"}});
        ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
        stage_ = std::move(*stage);
        ASSERT_TRUE(stage_->start().has_value());
    }
    void TearDown() override {
        if (stage_) stage_->stop();
    }

    // The thinker's stream for one request, then its payload. transformers never feeds the last
    // generated token back, so the talker gets it as the thinker's stop token.
    void submit(const std::string& id, const ThinkerRun& run, std::int64_t frames) {
        for (std::size_t k = 0; k < run.generated.size(); ++k) {
            Map chunk{{"token_id", Value(static_cast<std::int64_t>(run.generated[k]))},
                      {"stop", Value(k + 1 == run.generated.size())}};
            if (k == 0) {
                chunk.emplace("talker_hidden", Value(omni(run.media_hidden)));
                chunk.emplace("talker_hidden_begin", Value(run.media_begin));
            }
            push(pipeline::IncomingMessage{
                .request_id = id,
                .kind = pipeline::IncomingKind::stream_chunk,
                .chunk = std::make_shared<const pipeline::StreamChunk>(pipeline::StreamChunk{
                    .chunk_id = static_cast<std::int64_t>(k), .chunk = Value(std::move(chunk))}),
                .from_stage = "thinker"});
        }
        push(pipeline::IncomingMessage{.request_id = id,
                                       .kind = pipeline::IncomingKind::stream_done,
                                       .from_stage = "thinker"});
        Map sampling{{"temperature", Value(0)}, {"max_tokens", Value(frames)}};
        Value params(Map{{"stage_sampling", Value(Map{{"talker", Value(std::move(sampling))}})},
                         {"max_tokens", Value(1)}});  // the text's: the talker ignores it
        Map data{{"input_ids", Value(Tensor::from_vector(run.prompt))},
                 {"positions", Value(omni(run.positions))}};
        push(pipeline::IncomingMessage{.request_id = id,
                                       .kind = pipeline::IncomingKind::new_request,
                                       .payload = std::make_shared<const StagePayload>(StagePayload{
                                           .request_id = id,
                                           .request = OmniRequest{.params = std::move(params)},
                                           .data = Value(std::move(data))})});
    }
    void push_token(const std::string& id, std::int64_t index, std::int32_t token) {
        push(pipeline::IncomingMessage{
            .request_id = id,
            .kind = pipeline::IncomingKind::stream_chunk,
            .chunk = std::make_shared<const pipeline::StreamChunk>(pipeline::StreamChunk{
                .chunk_id = index,
                .chunk = Value(Map{{"token_id", Value(static_cast<std::int64_t>(token))},
                                   {"stop", Value(false)}})}),
            .from_stage = "thinker"});
    }
    // A text-only request whose thinker has sent `tokens` so far (no stop, no done).
    void submit_text(const std::string& id, const std::vector<std::int32_t>& tokens,
                     std::int64_t frames) {
        const OmniTokenIds& ids = tiny_->config.ids;
        std::vector<std::int32_t> prompt{static_cast<std::int32_t>(ids.im_start),
                                         static_cast<std::int32_t>(ids.user), 198};
        for (std::int32_t t = 300; t < 306; ++t) prompt.push_back(t);
        for (std::int64_t t :
             {ids.im_end, std::int64_t{198}, ids.im_start, ids.assistant, std::int64_t{198}}) {
            prompt.push_back(static_cast<std::int32_t>(t));
        }
        for (std::size_t k = 0; k < tokens.size(); ++k) push_token(id, k, tokens[k]);
        Map sampling{{"temperature", Value(0)}, {"max_tokens", Value(frames)}};
        push(pipeline::IncomingMessage{
            .request_id = id,
            .kind = pipeline::IncomingKind::new_request,
            .payload = std::make_shared<const StagePayload>(StagePayload{
                .request_id = id,
                .request = OmniRequest{.params = Value(Map{
                                           {"stage_sampling",
                                            Value(Map{{"talker", Value(std::move(sampling))}})}})},
                .data = Value(Map{{"input_ids", Value(Tensor::from_vector(prompt))}})})});
    }
    engine::ArScheduler& engine() { return dynamic_cast<engine::ArScheduler&>(*stage_); }
    // Idle with every KV block free again.
    bool clean() {
        return engine().wait_for_stats(
            [](const engine::ArSchedulerStats& stats) {
                return stats.idle && stats.running == 0 && stats.waiting == 0 &&
                       stats.free_blocks == stats.total_blocks;
            },
            std::chrono::minutes(2));
    }
    void push(pipeline::IncomingMessage message) {
        ASSERT_TRUE(stage_->inbox().push(std::move(message)));
    }
    // The codes [frames, 16] of every request, by id, once `count` requests ended.
    std::map<std::string, at::Tensor> results(std::size_t count) {
        std::map<std::string, at::Tensor> out;
        std::map<std::string, std::int64_t> streamed;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
        while (out.size() < count) {
            auto message = stage_->outbox().pop_until(deadline);
            OMNI_CHECK(message.has_value(), "timed out waiting for the talker");
            if (message->kind == pipeline::OutgoingKind::stream) {
                EXPECT_EQ(message->target.value_or(""), "code2wav");
                ++streamed[message->request_id];
                continue;
            }
            EXPECT_EQ(message->kind, pipeline::OutgoingKind::result)
                << (message->kind == pipeline::OutgoingKind::error ? message->error.to_string()
                                                                   : "");
            if (message->kind != pipeline::OutgoingKind::result) {
                out[message->request_id] = at::Tensor();
                continue;
            }
            const Value* codes = message->result->data.find("codes");
            OMNI_CHECK(codes != nullptr && codes->is_tensor(), "codes");
            out[message->request_id] = torch_bridge::to_torch(codes->as_tensor()).clone();
            EXPECT_EQ(streamed[message->request_id], out[message->request_id].size(0));
        }
        return out;
    }

    std::unique_ptr<Golden> golden_;
    std::unique_ptr<Tiny> tiny_;
    std::unique_ptr<pipeline::Scheduler> stage_;
};

TEST_F(TalkerStageGoldenTest, FramesMatchTransformersGenerate) {
    const at::Tensor expected = golden_->get("generate.code2wav_codes.0")[0].t();  // [frames, 16]
    auto talker = parse_talker_config(tiny_->config);
    ASSERT_TRUE(talker.has_value()) << talker.error().to_string();
    const ThinkerRun run = run_thinker(*tiny_, *golden_, talker->accept_hidden_layer);
    submit("a", run, expected.size(0));
    auto codes = results(1);
    ASSERT_TRUE(codes["a"].defined());
    EXPECT_TRUE(at::equal(codes["a"].to(at::kLong), expected)) << "ours\n"
                                                               << codes["a"] << "\ntransformers\n"
                                                               << expected;
}

TEST_F(TalkerStageGoldenTest, AloneEqualsInABatchOfEight) {
    auto talker = parse_talker_config(tiny_->config);
    ASSERT_TRUE(talker.has_value());
    const ThinkerRun run = run_thinker(*tiny_, *golden_, talker->accept_hidden_layer);
    submit("alone", run, 12);
    const at::Tensor alone = results(1)["alone"];
    ASSERT_TRUE(alone.defined());
    for (int i = 0; i < 8; ++i) submit("b" + std::to_string(i), run, 12);
    auto batch = results(8);
    for (const auto& [id, codes] : batch) {
        ASSERT_TRUE(codes.defined()) << id;
        EXPECT_TRUE(at::equal(codes, alone)) << id;
    }
}

// The ready gate: with the thinker's g0 and g1 only, the talker makes frame 0 and waits (holding
// its blocks) for g2; each further token lets one more frame through.
TEST_F(TalkerStageGoldenTest, WaitsForTheThinkersTokens) {
    submit_text("w", {400, 401}, 100);
    std::int64_t frames = 0;
    auto next_frame = [&] {
        auto message =
            stage_->outbox().pop_until(std::chrono::steady_clock::now() + std::chrono::minutes(2));
        OMNI_CHECK(message.has_value(), "no frame");
        EXPECT_EQ(message->kind, pipeline::OutgoingKind::stream);
        ++frames;
    };
    next_frame();
    ASSERT_TRUE(engine().wait_for_stats(
        [](const engine::ArSchedulerStats& stats) { return stats.not_ready == 1; },
        std::chrono::minutes(2)));
    EXPECT_EQ(frames, 1);
    push_token("w", 2, 402);
    next_frame();
    EXPECT_EQ(frames, 2);
    // An abort while it waits frees its blocks at once.
    stage_->abort("w");
    EXPECT_TRUE(clean());
    EXPECT_FALSE(stage_->outbox().try_pop().has_value());
}

// An abort mid-speech frees the talker's KV blocks; nothing of the request leaves afterwards, and
// the stage serves the next request as before.
TEST_F(TalkerStageGoldenTest, AbortMidSpeechFreesEverything) {
    submit_text("long", {400, 401, 402}, 4000);
    push(pipeline::IncomingMessage{.request_id = "long",
                                   .kind = pipeline::IncomingKind::stream_done,
                                   .from_stage = "thinker"});
    for (int k = 0; k < 5; ++k) {
        auto message =
            stage_->outbox().pop_until(std::chrono::steady_clock::now() + std::chrono::minutes(2));
        ASSERT_TRUE(message.has_value());
        ASSERT_EQ(message->kind, pipeline::OutgoingKind::stream);
    }
    stage_->abort("long");
    EXPECT_TRUE(clean());
    while (auto message = stage_->outbox().try_pop()) {
        EXPECT_EQ(message->kind, pipeline::OutgoingKind::stream) << "only frames made before";
    }
    EXPECT_EQ(engine().stats().aborted_requests, 1u);
    submit_text("after", {400, 401}, 3);
    push(pipeline::IncomingMessage{.request_id = "after",
                                   .kind = pipeline::IncomingKind::stream_done,
                                   .from_stage = "thinker"});
    auto codes = results(1);
    ASSERT_TRUE(codes["after"].defined());
    EXPECT_EQ(codes["after"].size(0), 3);
    EXPECT_TRUE(clean());
}

// Malformed input fails the request with a clear error, and nothing is held.
TEST_F(TalkerStageGoldenTest, BadInputFailsTheRequestOnly) {
    const auto im_start = static_cast<std::int32_t>(tiny_->config.ids.im_start);
    const auto user = static_cast<std::int32_t>(tiny_->config.ids.user);
    const auto assistant = static_cast<std::int32_t>(tiny_->config.ids.assistant);
    // An unknown voice.
    push(pipeline::IncomingMessage{
        .request_id = "v",
        .kind = pipeline::IncomingKind::new_request,
        .payload = std::make_shared<const StagePayload>(StagePayload{
            .request_id = "v",
            .request = OmniRequest{.inputs = Value(
                                       Map{{"audio", Value(Map{{"voice", Value("nobody")}})}})},
            .data = Value(Map{{"input_ids", Value(Tensor::from_vector(std::vector<std::int32_t>{
                                                im_start, assistant, 198}))}})})});
    auto message =
        stage_->outbox().pop_until(std::chrono::steady_clock::now() + std::chrono::minutes(2));
    ASSERT_TRUE(message.has_value());
    ASSERT_EQ(message->kind, pipeline::OutgoingKind::error);
    EXPECT_EQ(message->error.code, ErrorCode::invalid_argument);
    EXPECT_NE(message->error.message.find("unknown voice 'nobody'"), std::string::npos)
        << message->error.message;
    // A prompt that does not end with the assistant turn.
    push(pipeline::IncomingMessage{
        .request_id = "p",
        .kind = pipeline::IncomingKind::new_request,
        .payload = std::make_shared<const StagePayload>(StagePayload{
            .request_id = "p",
            .data = Value(Map{{"input_ids", Value(Tensor::from_vector(std::vector<std::int32_t>{
                                                im_start, user, 198, 300}))}})})});
    message =
        stage_->outbox().pop_until(std::chrono::steady_clock::now() + std::chrono::minutes(2));
    ASSERT_TRUE(message.has_value());
    ASSERT_EQ(message->kind, pipeline::OutgoingKind::error);
    EXPECT_NE(message->error.message.find("assistant"), std::string::npos)
        << message->error.message;
    // A thinker chunk without a token id.
    submit_text("c", {}, 3);
    push(pipeline::IncomingMessage{
        .request_id = "c",
        .kind = pipeline::IncomingKind::stream_chunk,
        .chunk = std::make_shared<const pipeline::StreamChunk>(
            pipeline::StreamChunk{.chunk_id = 0, .chunk = Value(Map{{"token_id", Value("x")}})}),
        .from_stage = "thinker"});
    push_token("c", 1, 400);
    message =
        stage_->outbox().pop_until(std::chrono::steady_clock::now() + std::chrono::minutes(2));
    ASSERT_TRUE(message.has_value());
    ASSERT_EQ(message->kind, pipeline::OutgoingKind::error);
    EXPECT_NE(message->error.message.find("token_id"), std::string::npos) << message->error.message;
    EXPECT_TRUE(clean());
}

// The code predictor alone: a frame of 3 rows equals each row's frame alone (greedy), its
// scratch KV is gone after end_frame() and after an error, and calls outside a frame are refused.
TEST(CodePredictorTest, BatchedFramesEqualSingleRowsAndScratchIsFreed) {
    auto tiny = make_tiny();
    auto config = parse_talker_config(tiny->config);
    ASSERT_TRUE(config.has_value());
    auto talker = load_talker(tiny->config, *config, lookup_of(*tiny->checkpoint));
    ASSERT_TRUE(talker.has_value()) << talker.error().to_string();
    CodePredictor& predictor = *talker->predictor;
    EXPECT_EQ(predictor.num_codes(), 15);
    EXPECT_EQ(predictor.vocab_size(0), 2048);
    at::manual_seed(3);
    const at::Tensor hidden = at::randn({3, config->text.hidden_size});
    const std::vector<std::int32_t> c0 = {5, 700, 2047};
    auto frame = [&](const at::Tensor& rows, std::span<const std::int32_t> tokens) {
        std::vector<std::vector<std::int32_t>> codes(tokens.size());
        auto logits = predictor.begin_frame(rows, tokens);
        OMNI_CHECK(logits.has_value(), "begin_frame");
        for (int depth = 0;; ++depth) {
            const at::Tensor best = logits->argmax(-1);
            std::vector<std::int32_t> chosen;
            for (std::size_t r = 0; r < tokens.size(); ++r) {
                chosen.push_back(static_cast<std::int32_t>(best[r].item<std::int64_t>()));
                codes[r].push_back(chosen.back());
            }
            if (depth + 1 == predictor.num_codes()) break;
            logits = predictor.next(depth + 1, chosen);
            OMNI_CHECK(logits.has_value(), "next");
        }
        predictor.end_frame();
        return codes;
    };
    const auto batched = frame(hidden, c0);
    EXPECT_TRUE(predictor.frame_free());
    for (std::size_t r = 0; r < c0.size(); ++r) {
        const auto alone =
            frame(hidden.narrow(0, static_cast<std::int64_t>(r), 1), std::span(&c0[r], 1));
        EXPECT_EQ(alone[0], batched[r]) << "row " << r;
        EXPECT_EQ(alone[0].size(), 15u);
    }
    // The feedback sum: the talker's c0 row plus one row per residual code.
    const at::Tensor sum = predictor.feedback_sum(c0[0], batched[0]);
    EXPECT_EQ(sum.size(0), config->text.hidden_size);
    // Errors free the frame and name the problem.
    ASSERT_TRUE(predictor.begin_frame(hidden, c0).has_value());
    EXPECT_FALSE(predictor.frame_free());
    const std::vector<std::int32_t> bad = {1, 2, 9999};
    EXPECT_EQ(predictor.next(1, bad).error().code, ErrorCode::invalid_argument);
    predictor.end_frame();
    EXPECT_TRUE(predictor.frame_free());
    EXPECT_EQ(predictor.next(1, c0).error().code, ErrorCode::failed_precondition);
    EXPECT_FALSE(predictor.begin_frame(hidden, std::vector<std::int32_t>{1}).has_value());
    EXPECT_FALSE(predictor.begin_frame(hidden, std::vector<std::int32_t>{1, 2, 5000}).has_value());
    EXPECT_TRUE(predictor.frame_free());
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni
