// ArScheduler over the FakeModel: outputs, batching, prefix cache, stops and request errors.
#include "engine/ar_scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "engine/fake_model.h"
#include "engine/hook_role.h"
#include "engine/scheduler_harness.h"

namespace omnirt::engine::testing {
namespace {

struct Case {
    std::string id;
    std::vector<std::int32_t> prompt;
    std::int64_t max_tokens;
};

// 16 requests of mixed lengths; the second half shares a 40-token prefix.
std::vector<Case> mixed_cases(const std::string& suffix = "") {
    std::vector<Case> cases;
    const auto shared = make_prompt(40, 999);
    for (int i = 0; i < 16; ++i) {
        std::vector<std::int32_t> prompt = make_prompt(1 + (i * 13) % 70, i);
        if (i >= 8) prompt.insert(prompt.begin(), shared.begin(), shared.end());
        cases.push_back(Case{"r" + std::to_string(i) + suffix, prompt, 1 + (i * 7) % 40});
    }
    return cases;
}

void expect_consistent(const RequestOutput& output, const std::vector<std::int32_t>& expected,
                       const std::string& id) {
    ASSERT_TRUE(output.result.has_value())
        << id << (output.error ? ": " + output.error->to_string() : "");
    EXPECT_EQ(output.output_ids(), expected) << id;
    EXPECT_EQ(output.streamed_ids(), expected) << id;
    for (std::size_t i = 0; i < output.client_chunks.size(); ++i) {
        EXPECT_EQ(output.client_chunks[i].find("index")->as_int(), static_cast<std::int64_t>(i));
    }
}

// usage.engine_time_s: the seconds from the request's arrival at the stage to its result,
// waiting for a place included (SGLang-Omni's engine_time_s; its speech API's X-Engine-Time).
// With one running request at a time the second waits for the first: its time is longer. Both
// arrive (are stamped) before either is handed over, so a stalled test thread cannot make the
// second arrive after the first has finished.
TEST(ArSchedulerTest, UsageHasTheSecondsFromArrivalToResult) {
    Harness harness({.max_running_requests = 1}, {});
    const auto before = std::chrono::steady_clock::now();
    auto first = Harness::request("first", make_prompt(12, 1), params_max_tokens(40));
    auto second = Harness::request("second", make_prompt(12, 2), params_max_tokens(40));
    harness.push(std::move(first));
    harness.push(std::move(second));
    ASSERT_TRUE(harness.wait_for_ends(2));
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
    double seconds[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
        const auto& output = harness.outputs[i == 0 ? "first" : "second"];
        ASSERT_TRUE(output.result.has_value());
        const Value* usage = output.result->data.find("usage");
        ASSERT_NE(usage, nullptr);
        const Value* engine_time = usage->find("engine_time_s");
        ASSERT_NE(engine_time, nullptr);
        ASSERT_TRUE(engine_time->is_float());
        seconds[i] = engine_time->as_number();
        EXPECT_GT(seconds[i], 0.0);
        EXPECT_LE(seconds[i], wall);
        EXPECT_EQ(usage->find("completion_tokens")->as_int(), 40);
    }
    EXPECT_GT(seconds[1], seconds[0]);
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerTest, GreedyOutputIsTheSameAloneInABatchAndFromThePrefixCache) {
    const auto cases = mixed_cases();
    // Alone, without a prefix cache.
    for (const Case& c : cases) {
        Harness alone({.enable_prefix_cache = false}, {});
        alone.submit(c.id, c.prompt, params_max_tokens(c.max_tokens));
        ASSERT_TRUE(alone.wait_for_ends(1));
        expect_consistent(alone.outputs[c.id], expected_greedy(c.prompt, c.max_tokens), c.id);
        const StagePayload& result = *alone.outputs[c.id].result;
        EXPECT_EQ(alone.outputs[c.id].finish_reason(), "length");
        const Value* usage = result.data.find("usage");
        ASSERT_NE(usage, nullptr);
        EXPECT_EQ(usage->find("prompt_tokens")->as_int(),
                  static_cast<std::int64_t>(c.prompt.size()));
        EXPECT_EQ(usage->find("completion_tokens")->as_int(), c.max_tokens);
        EXPECT_EQ(alone.model().first_violation(), "");
        EXPECT_TRUE(alone.wait_idle_and_clean());
    }

    // All at once, prompts chunked (32 prompt tokens per step), with the prefix cache.
    Harness batch({.max_prefill_tokens = 32}, {});
    for (const Case& c : cases) batch.submit(c.id, c.prompt, params_max_tokens(c.max_tokens));
    ASSERT_TRUE(batch.wait_for_ends(cases.size()));
    for (const Case& c : cases) {
        expect_consistent(batch.outputs[c.id], expected_greedy(c.prompt, c.max_tokens), c.id);
    }
    EXPECT_GT(batch.model().max_batch_size(), 8u);
    EXPECT_EQ(batch.model().first_violation(), "");
    ASSERT_TRUE(batch.wait_idle_and_clean());
    const ArSchedulerStats first = batch.scheduler().stats();
    EXPECT_GT(first.cached_blocks, 0u);

    // The same prompts again: served from the prefix cache, same output.
    const auto again = mixed_cases("-again");
    for (const Case& c : again) batch.submit(c.id, c.prompt, params_max_tokens(c.max_tokens));
    ASSERT_TRUE(batch.wait_for_ends(again.size()));
    for (const Case& c : again) {
        expect_consistent(batch.outputs[c.id], expected_greedy(c.prompt, c.max_tokens), c.id);
    }
    ASSERT_TRUE(batch.wait_idle_and_clean());
    const ArSchedulerStats second = batch.scheduler().stats();
    EXPECT_GT(second.prefix_hit_tokens, first.prefix_hit_tokens);
    // Every prompt of at least one block + 1 token hits the cache the second time.
    std::uint64_t hit_at_least = 0;
    for (const Case& c : again) hit_at_least += (c.prompt.size() - 1) / 4 * 4;
    EXPECT_GE(second.prefix_hit_tokens - first.prefix_hit_tokens, hit_at_least);
    EXPECT_LT(second.prefill_tokens - first.prefill_tokens, first.prefill_tokens);
    EXPECT_EQ(batch.model().first_violation(), "");
}

TEST(ArSchedulerTest, SharedPrefixIsComputedOnceForConcurrentRequests) {
    Harness harness({.max_prefill_tokens = 512}, {});
    const auto prefix = make_prompt(64, 5);
    auto first = prefix;
    first.push_back(1);
    harness.submit("first", first, params_max_tokens(3));
    ASSERT_TRUE(harness.wait_for_ends(1));
    // Later requests with the same 64-token prefix reuse its 16 blocks.
    for (int i = 0; i < 4; ++i) {
        auto prompt = prefix;
        prompt.push_back(static_cast<std::int32_t>(10 + i));
        harness.submit("later" + std::to_string(i), prompt, params_max_tokens(5));
    }
    ASSERT_TRUE(harness.wait_for_ends(4));
    for (int i = 0; i < 4; ++i) {
        auto prompt = prefix;
        prompt.push_back(static_cast<std::int32_t>(10 + i));
        expect_consistent(harness.outputs["later" + std::to_string(i)], expected_greedy(prompt, 5),
                          "later");
    }
    EXPECT_GE(harness.scheduler().stats().prefix_hit_tokens, 4u * 64u);
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

// Token t reads as two letters, so text positions map to tokens: token i is text[2i, 2i + 2).
Status two_letters(std::int32_t token, std::string& text) {
    text += static_cast<char>('a' + token % 26);
    text += static_cast<char>('A' + token / 26 % 26);
    return ok_status();
}

TEST(ArSchedulerTest, StopStringAcrossTokenBoundariesIsCutAndNeverStreamed) {
    const auto prompt = make_prompt(9, 77);
    const auto reference = expected_greedy(prompt, 40);
    std::string full;
    for (std::int32_t token : reference) ASSERT_TRUE(two_letters(token, full).has_value());
    // The stop string straddles tokens 5 and 6; cut at its first occurrence.
    const std::string stop = full.substr(11, 2);
    const std::size_t at = full.find(stop);
    ASSERT_LE(at, 11u);
    const std::size_t tokens_until_stop = (at + stop.size() - 1) / 2 + 1;

    Harness harness({}, {}, hook_role({.text = {.detokenize = two_letters}}));
    harness.submit("s", prompt,
                   Value(Map{{"max_tokens", Value(40)},
                             {"stop", Value(List{Value("zzzz"), Value(stop)})},
                             {"sampling", Value(Map{{"temperature", Value(0)}})}}));
    ASSERT_TRUE(harness.wait_for_ends(1));
    const RequestOutput& output = harness.outputs["s"];
    ASSERT_TRUE(output.result.has_value());
    EXPECT_EQ(output.finish_reason(), "stop");
    EXPECT_EQ(output.text(), full.substr(0, at));
    EXPECT_EQ(output.streamed_text(), output.text());
    EXPECT_EQ(
        output.output_ids(),
        std::vector<std::int32_t>(
            reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(tokens_until_stop)));
    for (const Value& chunk : output.client_chunks) {
        EXPECT_EQ(chunk.find("text")->as_string().find(stop), std::string::npos);
    }
    // Without a stop, the text is every token's.
    harness.submit("plain", prompt, params_max_tokens(40));
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.outputs["plain"].text(), full);
    EXPECT_EQ(harness.outputs["plain"].streamed_text(), full);
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerTest, LengthStopTokensAndEos) {
    const auto prompt = make_prompt(12, 3);
    const auto reference = expected_greedy(prompt, 30);
    // The first token that repeats an earlier one is a convenient "EOS": its first occurrence.
    const std::int32_t eos = reference[4];
    const auto first_eos = static_cast<std::size_t>(
        std::find(reference.begin(), reference.end(), eos) - reference.begin());

    Harness harness({.eos_token_ids = {eos}}, {}, hook_role({.text = {.detokenize = two_letters}}));
    harness.submit("length", prompt,
                   params_max_tokens(5, {{"temperature", Value(0)}, {"ignore_eos", Value(true)}}));
    harness.submit("zero", prompt, params_max_tokens(0));
    harness.submit("eos", prompt, params_max_tokens(30));
    harness.submit("ignore", prompt,
                   params_max_tokens(30, {{"temperature", Value(0)}, {"ignore_eos", Value(true)}}));
    const std::int32_t stop_id = reference[2];
    harness.submit("stop_id", prompt,
                   params_max_tokens(30, {{"temperature", Value(0)},
                                          {"ignore_eos", Value(true)},
                                          {"stop_token_ids", Value(List{Value(stop_id)})}}));
    ASSERT_TRUE(harness.wait_for_ends(5));

    auto head = [&](std::size_t count) {
        return std::vector<std::int32_t>(reference.begin(),
                                         reference.begin() + static_cast<std::ptrdiff_t>(count));
    };
    EXPECT_EQ(harness.outputs["length"].output_ids(), head(5));
    EXPECT_EQ(harness.outputs["length"].finish_reason(), "length");
    EXPECT_TRUE(harness.outputs["zero"].output_ids().empty());
    EXPECT_EQ(harness.outputs["zero"].finish_reason(), "length");
    EXPECT_TRUE(harness.outputs["zero"].client_chunks.empty());
    EXPECT_EQ(harness.outputs["eos"].output_ids(), head(first_eos + 1));  // EOS included
    EXPECT_EQ(harness.outputs["eos"].finish_reason(), "stop");
    std::string text_before_eos;
    for (std::size_t i = 0; i < first_eos; ++i)
        ASSERT_TRUE(two_letters(reference[i], text_before_eos).has_value());
    EXPECT_EQ(harness.outputs["eos"].text(), text_before_eos);  // EOS text left out
    EXPECT_EQ(harness.outputs["ignore"].output_ids(), head(30));
    const auto first_stop = static_cast<std::size_t>(
        std::find(reference.begin(), reference.end(), stop_id) - reference.begin());
    EXPECT_EQ(harness.outputs["stop_id"].output_ids(), head(first_stop + 1));
    EXPECT_EQ(harness.outputs["stop_id"].finish_reason(), "stop");
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerTest, MinTokensBansEos) {
    const auto prompt = make_prompt(12, 3);
    const auto reference = expected_greedy(prompt, 30);
    const std::int32_t eos = reference[0];
    Harness harness({.eos_token_ids = {eos}}, {});
    harness.submit("eager", prompt, params_max_tokens(30));
    harness.submit("patient", prompt,
                   params_max_tokens(30, {{"temperature", Value(0)}, {"min_tokens", Value(4)}}));
    ASSERT_TRUE(harness.wait_for_ends(2));
    EXPECT_EQ(harness.outputs["eager"].output_ids(), std::vector<std::int32_t>{eos});
    const auto patient = harness.outputs["patient"].output_ids();
    ASSERT_GE(patient.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_NE(patient[i], eos);
}

TEST(ArSchedulerTest, SeededSamplingIsTheSameAloneAndInABatch) {
    const auto prompt = make_prompt(20, 8);
    const Value sampled = params_max_tokens(
        25, {{"temperature", Value(1.5)}, {"top_k", Value(20)}, {"seed", Value(1234)}});
    std::vector<std::int32_t> alone_ids;
    {
        Harness alone({}, {});
        alone.submit("x", prompt, sampled);
        ASSERT_TRUE(alone.wait_for_ends(1));
        alone_ids = alone.outputs["x"].output_ids();
    }
    ASSERT_EQ(alone_ids.size(), 25u);
    EXPECT_NE(alone_ids, expected_greedy(prompt, 25));  // it does sample
    Harness batch({}, {});
    for (int i = 0; i < 6; ++i) {
        batch.submit("other" + std::to_string(i), make_prompt(5 + i, 100 + i),
                     params_max_tokens(10 + i, {{"temperature", Value(1.0)}}));
    }
    batch.submit("x", prompt, sampled);
    ASSERT_TRUE(batch.wait_for_ends(7));
    EXPECT_EQ(batch.outputs["x"].output_ids(), alone_ids);
}

TEST(ArSchedulerTest, LogprobsInChunksAndResult) {
    Harness harness({}, {});
    harness.submit("lp", make_prompt(6, 1),
                   params_max_tokens(4, {{"temperature", Value(0)}, {"top_logprobs", Value(2)}}));
    ASSERT_TRUE(harness.wait_for_ends(1));
    const RequestOutput& output = harness.outputs["lp"];
    ASSERT_EQ(output.client_chunks.size(), 4u);
    for (const Value& chunk : output.client_chunks) {
        ASSERT_NE(chunk.find("logprob"), nullptr);
        const List& top = chunk.find("top_logprobs")->as_list();
        ASSERT_EQ(top.size(), 2u);
        EXPECT_EQ(top[0].find("token_id")->as_int(), chunk.find("token_id")->as_int());
        EXPECT_DOUBLE_EQ(top[0].find("logprob")->as_number(), chunk.find("logprob")->as_number());
    }
    ASSERT_NE(output.result->data.find("logprobs"), nullptr);
    EXPECT_EQ(output.result->data.find("logprobs")->as_list().size(), 4u);
}

TEST(ArSchedulerTest, BadRequestsFailWithClearErrors) {
    Harness harness({}, {.num_blocks = 64, .block_size = 4, .max_positions = 200});
    harness.submit_payload("no_ids", StagePayload{.request_id = "no_ids", .data = Value(Map{})});
    harness.submit("vocab", {1, 2, 500}, params_max_tokens(3));
    harness.submit("empty", {}, params_max_tokens(3));
    harness.submit("temp", {1, 2},
                   Value(Map{{"sampling", Value(Map{{"temperature", Value(-1)}})}}));
    harness.submit("long", make_prompt(190, 1), params_max_tokens(20));
    harness.submit("kv", make_prompt(250, 1), Value(Map{}));
    Map bad_ids{{"input_ids", Value(List{Value(1), Value("two")})}};
    harness.submit_payload("list", StagePayload{.request_id = "list", .data = Value(bad_ids)});
    harness.submit_payload("salt",
                           StagePayload{.request_id = "salt",
                                        .data = Value(Map{{"input_ids", Value(List{Value(1)})},
                                                          {"cache_salt", Value(3)}})});
    ASSERT_TRUE(harness.wait_for_ends(8));
    auto message = [&](const std::string& id) {
        const auto& error = harness.outputs[id].error;
        return error ? error->to_string() : std::string("no error");
    };
    EXPECT_NE(message("no_ids").find(
                  "invalid_argument: stage 'thinker': the payload has no data.input_ids"),
              std::string::npos)
        << message("no_ids");
    EXPECT_NE(message("vocab").find("data.input_ids[2] = 500 is outside the vocabulary of 64"),
              std::string::npos)
        << message("vocab");
    EXPECT_NE(message("empty").find("data.input_ids is empty"), std::string::npos)
        << message("empty");
    EXPECT_NE(message("temp").find("params.sampling.temperature must be in [0, inf)"),
              std::string::npos)
        << message("temp");
    EXPECT_NE(message("long").find("out_of_range: stage 'thinker': the prompt (190 tokens) and "
                                   "max_tokens (20) exceed the context of 200 tokens"),
              std::string::npos)
        << message("long");
    EXPECT_NE(message("kv").find("leaves no room in the context of 200 tokens"), std::string::npos)
        << message("kv");
    EXPECT_NE(message("list").find("data.input_ids[1] must be a token id"), std::string::npos)
        << message("list");
    EXPECT_NE(message("salt").find("data.cache_salt must be a string"), std::string::npos)
        << message("salt");

    // A request without max_tokens fills the context.
    harness.submit("fill", make_prompt(150, 2),
                   Value(Map{{"sampling", Value(Map{{"temperature", Value(0)}})}}));
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.outputs["fill"].output_ids().size(), 50u);
    EXPECT_EQ(harness.outputs["fill"].finish_reason(), "length");
    // Stream messages are not for this scheduler: dropped.
    ASSERT_TRUE(harness.scheduler().inbox().push(pipeline::IncomingMessage{
        .request_id = "fill", .kind = pipeline::IncomingKind::stream_done, .from_stage = "x"}));
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerTest, PrepareInputBuildsPromptsWithoutInputIds) {
    // A stand-in for chat rendering + tokenization: inputs.word's characters are the ids.
    auto prepare = [](const StagePayload& payload) -> Result<std::vector<std::int32_t>> {
        const Value* word = payload.request.inputs.find("word");
        if (word == nullptr || !word->is_string()) {
            return fail(ErrorCode::invalid_argument, "inputs.word must be a string");
        }
        std::vector<std::int32_t> ids;
        for (char c : word->as_string()) ids.push_back(c - 'a');
        return ids;
    };
    Harness harness({}, {}, hook_role({.text = {.prepare_input = prepare}}));
    auto request = [](Value inputs) {
        return OmniRequest{.inputs = std::move(inputs), .params = params_max_tokens(4)};
    };
    harness.submit_payload("word",
                           StagePayload{.request_id = "word",
                                        .request = request(Value(Map{{"word", Value("hello")}})),
                                        .data = Value(Map{})});
    harness.submit_payload("bad",
                           StagePayload{.request_id = "bad", .request = request(Value(Map{}))});
    // data.input_ids wins over the hook.
    harness.submit("ids", {7, 4, 11, 11, 14}, params_max_tokens(4));
    ASSERT_TRUE(harness.wait_for_ends(3));
    EXPECT_EQ(harness.outputs["word"].output_ids(), expected_greedy({7, 4, 11, 11, 14}, 4));
    EXPECT_EQ(harness.outputs["ids"].output_ids(), expected_greedy({7, 4, 11, 11, 14}, 4));
    ASSERT_TRUE(harness.outputs["bad"].error.has_value());
    EXPECT_NE(harness.outputs["bad"].error->message.find("inputs.word must be a string"),
              std::string::npos);
}

TEST(ArSchedulerTest, CreateValidatesOptions) {
    auto model = [] { return std::make_unique<FakeModel>(8, 4); };
    auto no_size = ArScheduler::create({.stage_name = "t"}, model());
    ASSERT_FALSE(no_size.has_value());
    EXPECT_NE(no_size.error().message.find("set num_kv_blocks or kv_cache_bytes"),
              std::string::npos);
    auto bad_eos = ArScheduler::create(
        {.stage_name = "t", .num_kv_blocks = 8, .eos_token_ids = {64}}, model());
    ASSERT_FALSE(bad_eos.has_value());
    EXPECT_NE(bad_eos.error().message.find("eos token id 64 is outside the vocabulary"),
              std::string::npos);
    auto no_model = ArScheduler::create({.stage_name = "t", .num_kv_blocks = 8}, nullptr);
    ASSERT_FALSE(no_model.has_value());
    // From a byte budget: 1 layer * 1 head * 1 dim * 4 bytes * 2 (K, V) * 4 slots = 32 bytes a
    // block.
    auto by_bytes = ArScheduler::create(
        {.stage_name = "t", .kv_cache_bytes = 32 * 10, .block_size = 4}, model());
    ASSERT_TRUE(by_bytes.has_value()) << by_bytes.error().to_string();
    EXPECT_EQ((*by_bytes)->stats().total_blocks, 10u);
}

}  // namespace
}  // namespace omnirt::engine::testing
