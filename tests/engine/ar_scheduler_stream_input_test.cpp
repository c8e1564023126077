// ArScheduler input streams (accept_streams) and the ready gate, with the FakeModel: a
// talker-like request takes one chunk of its input stream per step, waits (keeping its blocks,
// without spinning) while no chunk is there, and goes on alone after stream_done; chunks that
// come before the request are kept for it (bounded: the oldest go first, and their request fails
// if it comes); aborts free a waiting request at once.
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/ar_scheduler.h"
#include "engine/fake_model.h"
#include "engine/hook_role.h"
#include "engine/scheduler_harness.h"

namespace omnirt::engine::testing {
namespace {

constexpr auto kHangGuard = std::chrono::seconds(60);

// Each step takes the oldest chunk ({"value": int}) and writes its value into the cache at the
// step's last position, in place of the token there (the fake model reads an injected row's
// first element as the token value).
Status take_one_chunk(ArSequence& sequence, SequenceInput& input) {
    StreamInput& stream = sequence.stream_input();
    if (stream.chunks.empty()) return ok_status();
    const Value* value = stream.chunks.front().chunk->chunk.find("value");
    if (value == nullptr || !value->is_int()) {
        return fail(ErrorCode::invalid_argument, "a stream chunk without an int value");
    }
    const auto rows = static_cast<std::int64_t>(input.tokens.size());
    at::Tensor embeds = at::zeros({1, kFakeHidden}, at::kFloat);
    embeds[0][0] = static_cast<float>(value->as_int());
    input.embeddings = RowValues{.rows = {rows - 1}, .values = embeds};
    stream.chunks.pop_front();
    return ok_status();
}

bool has_input(const ArSequence& sequence) {
    return !sequence.stream_input().chunks.empty() || sequence.stream_input().done();
}

ArEngineConfig stream_options() {
    // The role injects values in prepare_step, which the prefix-cache keys do not cover.
    return ArEngineConfig{.enable_prefix_cache = false, .accept_streams = true};
}

std::unique_ptr<ArRole> stream_role(std::function<bool(const ArSequence&)> ready = has_input) {
    return hook_role({.prepare = take_one_chunk, .ready = std::move(ready)});
}

// The output of `prompt` when step i's last position holds values[i] (while there are values).
std::vector<std::int32_t> expected_fed(const std::vector<std::int32_t>& prompt,
                                       const std::vector<std::int64_t>& values,
                                       std::int64_t max_tokens) {
    std::vector<std::int64_t> history(prompt.begin(), prompt.end());
    std::vector<std::int32_t> out;
    for (std::int64_t i = 0; i < max_tokens; ++i) {
        if (static_cast<std::size_t>(i) < values.size()) {
            history.back() = values[static_cast<std::size_t>(i)];
        }
        const std::int32_t token = next_token(history);
        out.push_back(token);
        history.push_back(token);
    }
    return out;
}

void send_chunk(Harness& harness, const std::string& id, std::int64_t chunk_id, std::int64_t value,
                const std::string& from = "thinker") {
    auto chunk = std::make_shared<const pipeline::StreamChunk>(
        pipeline::StreamChunk{.chunk_id = chunk_id, .chunk = Value(Map{{"value", Value(value)}})});
    ASSERT_TRUE(harness.scheduler().inbox().push(
        pipeline::IncomingMessage{.request_id = id,
                                  .kind = pipeline::IncomingKind::stream_chunk,
                                  .chunk = std::move(chunk),
                                  .from_stage = from}));
}

void send_done(Harness& harness, const std::string& id, const std::string& from = "thinker") {
    ASSERT_TRUE(harness.scheduler().inbox().push(pipeline::IncomingMessage{
        .request_id = id, .kind = pipeline::IncomingKind::stream_done, .from_stage = from}));
}

// Waits until the engine waits for its inbox after at least `steps` steps; the step count it
// reached then.
std::uint64_t wait_quiet_after(Harness& harness, std::uint64_t steps) {
    EXPECT_TRUE(harness.scheduler().wait_for_stats(
        [steps](const ArSchedulerStats& stats) { return stats.idle && stats.steps >= steps; },
        kHangGuard));
    return harness.scheduler().stats().steps;
}

TEST(ArSchedulerStreamInputTest, EachStepTakesAChunkAndWaitsForTheNext) {
    Harness harness(stream_options(), {}, stream_role());
    const auto prompt = make_prompt(6, 21);
    harness.submit("talker", prompt, params_max_tokens(8));
    // No chunk yet: not admitted, nothing computed, the engine waits.
    ASSERT_TRUE(harness.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) {
            return stats.idle && stats.waiting == 1 && stats.not_ready == 1;
        },
        kHangGuard));
    EXPECT_EQ(harness.scheduler().stats().steps, 0u);

    const std::vector<std::int64_t> values = {5, 9, 2, 40, 17};
    for (std::int64_t i = 0; i < 3; ++i) send_chunk(harness, "talker", i, values[i]);
    ASSERT_TRUE(harness.wait_for_chunks("talker", 3));
    EXPECT_EQ(wait_quiet_after(harness, 3), 3u);  // one step per chunk, then it waits
    harness.drain();
    EXPECT_EQ(harness.outputs["talker"].client_chunks.size(), 3u);
    const ArSchedulerStats waiting = harness.scheduler().stats();
    EXPECT_EQ(waiting.running, 1u);
    EXPECT_EQ(waiting.not_ready, 1u);
    EXPECT_GT(waiting.total_blocks, waiting.free_blocks);  // it keeps its blocks

    // Another request with its stream already done runs while the first one waits.
    const auto other_prompt = make_prompt(9, 22);
    harness.submit("other", other_prompt, params_max_tokens(4));
    send_done(harness, "other");
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.outputs["other"].output_ids(), expected_greedy(other_prompt, 4));
    EXPECT_FALSE(harness.outputs["talker"].result.has_value());

    // One chunk at a time: the engine wakes for it, steps, tries once more and waits again
    // (a loop that spun instead would count many turns).
    const std::uint64_t base = wait_quiet_after(harness, 0);
    const std::uint64_t turns = harness.scheduler().stats().loop_turns;
    for (std::int64_t i = 3; i < 5; ++i) {
        send_chunk(harness, "talker", i, values[i]);
        ASSERT_TRUE(harness.wait_for_chunks("talker", static_cast<std::size_t>(i) + 1));
        EXPECT_EQ(wait_quiet_after(harness, base + static_cast<std::uint64_t>(i) - 2),
                  base + static_cast<std::uint64_t>(i) - 2);
    }
    EXPECT_LE(harness.scheduler().stats().loop_turns, turns + 8);
    send_done(harness, "talker");  // the rest of the output needs no input
    ASSERT_TRUE(harness.wait_for_ends(1));
    const RequestOutput& output = harness.outputs["talker"];
    ASSERT_FALSE(output.error.has_value()) << output.error->to_string();
    EXPECT_EQ(output.output_ids(), expected_fed(prompt, values, 8));
    EXPECT_NE(output.output_ids(), expected_greedy(prompt, 8));
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerStreamInputTest, ChunksBeforeTheRequestAreKeptForIt) {
    Harness harness(stream_options(), {}, stream_role());
    const std::vector<std::int64_t> values = {3, 30, 13};
    for (std::int64_t i = 0; i < 3; ++i) send_chunk(harness, "early", i, values[i]);
    send_done(harness, "early");
    ASSERT_TRUE(harness.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) { return stats.early_stream_requests == 1; },
        kHangGuard));
    const auto prompt = make_prompt(5, 23);
    harness.submit("early", prompt, params_max_tokens(6));
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.outputs["early"].output_ids(), expected_fed(prompt, values, 6));
    EXPECT_EQ(harness.scheduler().stats().early_stream_requests, 0u);
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerStreamInputTest, TwoSourcesMustBothBeDone) {
    Harness harness(stream_options(), {}, stream_role());
    const auto prompt = make_prompt(4, 24);
    harness.submit("pair", prompt, params_max_tokens(5));
    send_chunk(harness, "pair", 0, 8, "audio");
    send_done(harness, "pair", "thinker");
    send_chunk(harness, "pair", 0, 11, "thinker");  // after its own done: still counted
    // Two chunks give two steps; "audio" has not finished, so the request waits.
    ASSERT_TRUE(harness.wait_for_chunks("pair", 2));
    EXPECT_EQ(wait_quiet_after(harness, 2), 2u);
    harness.drain();
    EXPECT_EQ(harness.outputs["pair"].client_chunks.size(), 2u);
    send_done(harness, "pair", "audio");
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.outputs["pair"].output_ids(), expected_fed(prompt, {8, 11}, 5));
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerStreamInputTest, AbortOfAWaitingRequestFreesItsBlocksAtOnce) {
    Harness harness(stream_options(), {}, stream_role());
    harness.submit("held", make_prompt(10, 25), params_max_tokens(20));
    send_chunk(harness, "held", 0, 4);
    send_chunk(harness, "held", 1, 6);
    ASSERT_TRUE(harness.wait_for_chunks("held", 2));
    wait_quiet_after(harness, 2);
    // The engine is blocked on its inbox; the abort alone must wake it.
    harness.scheduler().abort("held");
    EXPECT_TRUE(harness.wait_idle_and_clean());
    EXPECT_EQ(harness.scheduler().stats().aborted_requests, 1u);
    // Chunks of a request that has not come yet are dropped by its abort, and later ones are
    // not kept.
    send_chunk(harness, "never", 0, 1);
    ASSERT_TRUE(harness.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) { return stats.early_stream_requests == 1; },
        kHangGuard));
    harness.scheduler().abort("never");
    ASSERT_TRUE(harness.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) { return stats.early_stream_requests == 0; },
        kHangGuard));
    send_chunk(harness, "never", 1, 2);
    send_chunk(harness, "held", 2, 2);
    // A request behind them in the inbox: once it ended, they were handled (and dropped).
    const auto prompt = make_prompt(3, 26);
    harness.submit("sync", prompt, params_max_tokens(2));
    send_done(harness, "sync");
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.outputs["sync"].output_ids(), expected_greedy(prompt, 2));
    EXPECT_EQ(harness.scheduler().stats().early_stream_requests, 0u);
    EXPECT_FALSE(harness.outputs["held"].result.has_value());
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerStreamInputTest, LateChunksOfAnEndedRequestAreNotKept) {
    Harness harness(stream_options(), {}, stream_role());
    const auto prompt = make_prompt(5, 27);
    harness.submit("done", prompt, params_max_tokens(3));
    send_done(harness, "done");
    ASSERT_TRUE(harness.wait_for_ends(1));
    send_chunk(harness, "done", 0, 7);
    send_done(harness, "done");
    harness.submit("sync", prompt, params_max_tokens(2));
    send_done(harness, "sync");
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.scheduler().stats().early_stream_requests, 0u);
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerStreamInputTest, PastTheBoundTheOldestEarlyChunksGoAndTheirRequestFails) {
    ArEngineConfig options = stream_options();
    options.max_early_stream_chunks = 4;
    Harness harness(std::move(options), {}, stream_role());
    // "gone" never comes (a route took it elsewhere); "first" comes later.
    for (std::int64_t i = 0; i < 3; ++i) send_chunk(harness, "gone", i, i + 1);
    for (std::int64_t i = 0; i < 2; ++i) send_chunk(harness, "first", i, i + 7);
    ASSERT_TRUE(harness.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) { return stats.early_stream_requests == 1; },
        kHangGuard));  // "gone" was evicted: 5 chunks > 4
    // Done signals alone count as requests: four more requests push "first" out too.
    for (int i = 0; i < 4; ++i) send_done(harness, "done-only-" + std::to_string(i));
    ASSERT_TRUE(harness.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) { return stats.early_stream_requests == 4; },
        kHangGuard));
    // Nothing failed on the way; "first" fails when it comes, with the reason.
    EXPECT_EQ(harness.scheduler().stats().failed_requests, 0u);
    harness.submit("first", make_prompt(4, 28), params_max_tokens(5));
    ASSERT_TRUE(harness.wait_for_ends(1));
    const RequestOutput& failed = harness.outputs["first"];
    ASSERT_TRUE(failed.error.has_value());
    EXPECT_EQ(failed.error->code, ErrorCode::resource_exhausted);
    EXPECT_NE(failed.error->message.find("stream chunks that came before this request were "
                                         "dropped"),
              std::string::npos)
        << failed.error->message;
    // A late chunk of an evicted request is dropped, not kept (it would push "done-only-0" out),
    // and a request whose early input survived runs on it.
    send_chunk(harness, "gone", 3, 9);
    const auto prompt = make_prompt(4, 29);
    harness.submit("done-only-0", prompt, params_max_tokens(3));
    ASSERT_TRUE(harness.wait_for_ends(1));
    ASSERT_FALSE(harness.outputs["done-only-0"].error.has_value())
        << harness.outputs["done-only-0"].error->to_string();
    EXPECT_EQ(harness.outputs["done-only-0"].output_ids(), expected_greedy(prompt, 3));
    EXPECT_EQ(harness.scheduler().stats().early_stream_requests, 3u);
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerStreamInputTest, AnIdCanComeAgainOnceItsRequestEnded) {
    for (const bool streams : {false, true}) {
        Harness harness(streams ? stream_options() : ArEngineConfig{}, {},
                        streams ? stream_role() : nullptr);
        const auto prompt = make_prompt(5, 32);
        for (int round = 0; round < 2; ++round) {
            harness.submit("again", prompt, params_max_tokens(3));
            if (streams) send_chunk(harness, "again", 0, 12 + round);
            if (streams) send_done(harness, "again");
            ASSERT_TRUE(harness.wait_for_ends(1)) << streams << " round " << round;
            ASSERT_FALSE(harness.outputs["again"].error.has_value());
            EXPECT_EQ(harness.outputs["again"].output_ids(),
                      streams ? expected_fed(prompt, {12 + round}, 3) : expected_greedy(prompt, 3))
                << streams << " round " << round;
            harness.outputs.erase("again");
        }
        EXPECT_TRUE(harness.wait_idle_and_clean());
    }
}

TEST(ArSchedulerStreamInputTest, AThrowingReadyCheckFailsItsRequestOnly) {
    Harness harness(stream_options(), {}, stream_role([](const ArSequence& sequence) -> bool {
                        if (sequence.request_id() == "bad") {
                            throw std::runtime_error("no state for this one");
                        }
                        return has_input(sequence);
                    }));
    harness.submit("bad", make_prompt(4, 30), params_max_tokens(3));
    const auto prompt = make_prompt(5, 31);
    harness.submit("good", prompt, params_max_tokens(3));
    send_done(harness, "good");
    ASSERT_TRUE(harness.wait_for_ends(2));
    ASSERT_TRUE(harness.outputs["bad"].error.has_value());
    EXPECT_NE(harness.outputs["bad"].error->message.find("the ready check threw: no state"),
              std::string::npos)
        << harness.outputs["bad"].error->message;
    EXPECT_EQ(harness.outputs["good"].output_ids(), expected_greedy(prompt, 3));
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerStreamInputTest, AMalformedChunkFailsItsRequestOnly) {
    Harness harness(stream_options(), {}, stream_role());
    harness.submit("bad", make_prompt(4, 29), params_max_tokens(3));
    ASSERT_TRUE(harness.scheduler().inbox().push(
        pipeline::IncomingMessage{.request_id = "bad",
                                  .kind = pipeline::IncomingKind::stream_chunk,
                                  .chunk = std::make_shared<const pipeline::StreamChunk>(
                                      pipeline::StreamChunk{.chunk = Value("not a map")}),
                                  .from_stage = "thinker"}));
    // A message that claims to be a chunk but carries none is dropped.
    ASSERT_TRUE(harness.scheduler().inbox().push(pipeline::IncomingMessage{
        .request_id = "good", .kind = pipeline::IncomingKind::stream_chunk}));
    const auto prompt = make_prompt(4, 30);
    harness.submit("good", prompt, params_max_tokens(3));
    send_done(harness, "good");
    ASSERT_TRUE(harness.wait_for_ends(2));
    ASSERT_TRUE(harness.outputs["bad"].error.has_value());
    EXPECT_NE(harness.outputs["bad"].error->message.find("a stream chunk without an int value"),
              std::string::npos);
    EXPECT_EQ(harness.outputs["good"].output_ids(), expected_greedy(prompt, 3));
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerStreamInputTest, WithoutAcceptStreamsChunksAreDropped) {
    Harness harness({}, {});
    const auto prompt = make_prompt(6, 31);
    send_chunk(harness, "plain", 0, 5);
    harness.submit("plain", prompt, params_max_tokens(4));
    send_chunk(harness, "plain", 1, 5);
    send_done(harness, "plain");
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.outputs["plain"].output_ids(), expected_greedy(prompt, 4));
    EXPECT_EQ(harness.scheduler().stats().early_stream_requests, 0u);
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

}  // namespace
}  // namespace omnirt::engine::testing
