// ArSchedulers of tensor-parallel ranks in lockstep (ArEngineConfig::lockstep), over the
// FakeModel and an in-memory group (agree() is a barrier that exchanges the proposals): the ranks
// schedule the same batches however late their messages arrive, unseeded requests draw rank 0's
// seeds, aborts follow rank 0, stopping ends every rank, and a rank whose peer stopped or whose
// group broke fails its requests with a clear error. The c10d group and the real model are
// tested in tests/models/qwen3_tensor_parallel_test.cpp.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/ar_scheduler.h"
#include "engine/fake_model.h"
#include "engine/hook_role.h"
#include "engine/lockstep.h"
#include "engine/scheduler_harness.h"

namespace omnirt::engine::testing {
namespace {

// The shared state of an in-memory group: a generation-counting barrier that hands every rank
// the decision of the proposals, and rank 0's proposal (connect() passes its seed through it).
class MemoryGroup {
  public:
    explicit MemoryGroup(int size) : size_(size), proposals_(static_cast<std::size_t>(size)) {}

    struct Outcome {
        LockstepDecision decision;
        LockstepProposal rank_zero;
    };

    Result<Outcome> exchange(int rank, const LockstepProposal& proposal) {
        std::unique_lock lock(mutex_);
        if (broken_) return fail(ErrorCode::unavailable, *broken_);
        proposals_[static_cast<std::size_t>(rank)] = proposal;
        const std::uint64_t generation = generation_;
        if (++arrived_ == size_) {
            LockstepDecision decision{.messages = proposals_[0].received_messages};
            for (int r = 0; r < size_; ++r) {
                const LockstepProposal& p = proposals_[static_cast<std::size_t>(r)];
                decision.messages = std::min(decision.messages, p.received_messages);
                if (p.stopping && !decision.stop) {
                    decision.stop = true;
                    decision.stopping_rank = r;
                }
                if (p.state_digest != proposals_[0].state_digest) decision.diverged = true;
            }
            decision.aborts = proposals_[0].aborts;
            outcome_ = Outcome{.decision = std::move(decision), .rank_zero = proposals_[0]};
            arrived_ = 0;
            ++generation_;
            ++agreements_;
            changed_.notify_all();
            return outcome_;
        }
        changed_.wait(lock, [&] { return generation_ != generation || broken_; });
        if (generation_ == generation) return fail(ErrorCode::unavailable, *broken_);
        return outcome_;
    }

    // Fails every waiting and later agreement.
    void break_group(const std::string& why) {
        {
            std::lock_guard lock(mutex_);
            broken_ = why;
        }
        changed_.notify_all();
    }

    std::uint64_t agreements() const {
        std::lock_guard lock(mutex_);
        return agreements_;
    }
    bool broken() const {
        std::lock_guard lock(mutex_);
        return broken_.has_value();
    }

  private:
    const int size_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<LockstepProposal> proposals_;
    int arrived_ = 0;
    std::uint64_t generation_ = 0;
    std::uint64_t agreements_ = 0;
    Outcome outcome_;
    std::optional<std::string> broken_;
};

class MemoryLockstep final : public Lockstep {
  public:
    MemoryLockstep(MemoryGroup& group, int rank, int size, std::optional<Error> connect_error = {})
        : group_(group), rank_(rank), size_(size), connect_error_(std::move(connect_error)) {}
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    Result<std::uint64_t> connect(std::uint64_t seed_state) override {
        if (connect_error_) return fail(*connect_error_);
        OMNI_TRY(MemoryGroup::Outcome outcome,
                 group_.exchange(rank_, {.state_digest = seed_state}));
        return outcome.rank_zero.state_digest;
    }
    Result<LockstepDecision> agree(const LockstepProposal& proposal) override {
        OMNI_TRY(MemoryGroup::Outcome outcome, group_.exchange(rank_, proposal));
        return outcome.decision;
    }
    void cancel() override { group_.break_group("cancelled"); }

  private:
    MemoryGroup& group_;
    int rank_;
    int size_;
    std::optional<Error> connect_error_;
};

constexpr std::uint64_t kRankZeroSeed = 1234;

// Two ranks' schedulers over FakeModels. Rank 1 is declared first so that rank 0 stops first
// (the order of a TP stage's shutdown).
// With `streams`: every step of a request takes one chunk of its input stream, and a request
// without a chunk (and whose stream is not done) waits (ArRole::ready).
struct TwoRanks {
    explicit TwoRanks(Harness::Config config = {.num_blocks = 256, .block_size = 16},
                      std::optional<Error> connect_error = {}, bool streams = false)
        : group(2),
          follower(options(1, connect_error, streams), config, role(streams)),
          leader(options(0, connect_error, streams), config, role(streams)) {}

    ArEngineConfig options(int rank, const std::optional<Error>& connect_error, bool streams) {
        return ArEngineConfig{
            .max_prefill_tokens = 24,  // chunked prompts
            .accept_streams = streams,
            .seed = rank == 0 ? kRankZeroSeed : 99,
            .lockstep = std::make_shared<MemoryLockstep>(group, rank, 2, connect_error)};
    }
    static std::unique_ptr<ArRole> role(bool streams) {
        if (!streams) return nullptr;
        return hook_role({.prepare =
                              [](ArSequence& sequence, SequenceInput&) {
                                  if (!sequence.stream_input().chunks.empty()) {
                                      sequence.stream_input().chunks.pop_front();
                                  }
                                  return ok_status();
                              },
                          .ready =
                              [](const ArSequence& sequence) {
                                  return !sequence.stream_input().chunks.empty() ||
                                         sequence.stream_input().done();
                              }});
    }

    // A stream message for both ranks, the follower first.
    void stream(const std::string& id, bool done) {
        for (Harness* rank : {&follower, &leader}) {
            pipeline::IncomingMessage message{.request_id = id,
                                              .kind = done ? pipeline::IncomingKind::stream_done
                                                           : pipeline::IncomingKind::stream_chunk,
                                              .from_stage = "thinker"};
            if (!done) {
                message.chunk = std::make_shared<const pipeline::StreamChunk>(
                    pipeline::StreamChunk{.chunk = Value(Map{})});
            }
            ASSERT_TRUE(rank->scheduler().inbox().push(std::move(message)));
        }
    }

    // Like rank 0 of a TP group: the follower gets the message first.
    void submit(const std::string& id, const std::vector<std::int32_t>& prompt, Value params) {
        follower.submit(id, prompt, params);
        leader.submit(id, prompt, std::move(params));
    }

    MemoryGroup group;
    Harness follower;
    Harness leader;
};

Value sampled(std::int64_t max_tokens, std::optional<std::int64_t> seed = std::nullopt) {
    Map sampling{{"temperature", Value(1.0)}};
    if (seed) sampling.emplace("seed", Value(*seed));
    return params_max_tokens(max_tokens, std::move(sampling));
}

TEST(ArLockstepTest, RanksComputeTheSameBatchesWhenMessagesArriveAtDifferentTimes) {
    TwoRanks ranks;
    const auto shared = make_prompt(30, 5);
    std::vector<std::pair<std::string, std::vector<std::int32_t>>> prompts;
    for (int i = 0; i < 12; ++i) {
        std::vector<std::int32_t> prompt = make_prompt(1 + (i * 11) % 50, i);
        if (i % 3 == 0) prompt.insert(prompt.begin(), shared.begin(), shared.end());
        prompts.emplace_back("r" + std::to_string(i), std::move(prompt));
    }
    // Rank 0 gets every message at once; rank 1 gets them from another thread, as it goes.
    for (const auto& [id, prompt] : prompts) ranks.leader.submit(id, prompt, params_max_tokens(9));
    ranks.leader.submit("unseeded", make_prompt(7, 77), sampled(12));
    std::thread late([&] {
        for (const auto& [id, prompt] : prompts) {
            ranks.follower.submit(id, prompt, params_max_tokens(9));
        }
        ranks.follower.submit("unseeded", make_prompt(7, 77), sampled(12));
    });
    ASSERT_TRUE(ranks.leader.wait_for_ends(prompts.size() + 1));
    ASSERT_TRUE(ranks.follower.wait_for_ends(prompts.size() + 1));
    late.join();
    for (const auto& [id, prompt] : prompts) {
        ASSERT_TRUE(ranks.leader.outputs[id].result) << id;
        EXPECT_EQ(ranks.leader.outputs[id].output_ids(), expected_greedy(prompt, 9)) << id;
        EXPECT_EQ(ranks.follower.outputs[id].output_ids(), expected_greedy(prompt, 9)) << id;
    }
    // Different seed options, one seed state: rank 0's.
    ASSERT_TRUE(ranks.follower.outputs["unseeded"].result);
    EXPECT_EQ(ranks.follower.outputs["unseeded"].output_ids(),
              ranks.leader.outputs["unseeded"].output_ids());
    EXPECT_EQ(ranks.leader.model().steps(), ranks.follower.model().steps());
    EXPECT_EQ(ranks.leader.model().max_batch_size(), ranks.follower.model().max_batch_size());
    EXPECT_GT(ranks.leader.model().max_batch_size(), 1u);
    EXPECT_EQ(ranks.leader.model().first_violation(), "");
    EXPECT_TRUE(ranks.leader.wait_idle_and_clean());
    EXPECT_TRUE(ranks.follower.wait_idle_and_clean());
    EXPECT_EQ(ranks.leader.scheduler().stats().steps, ranks.follower.scheduler().stats().steps);
}

TEST(ArLockstepTest, RankZeroDecidesAborts) {
    TwoRanks ranks;
    // An abort that reaches rank 0 before the request: neither rank runs it.
    ranks.leader.scheduler().abort("early");
    ranks.submit("early", make_prompt(5, 1), params_max_tokens(4));
    // A request aborted while it runs, and an abort that only a follower sees (ignored).
    ranks.submit("long", make_prompt(6, 2), params_max_tokens(4000));
    ranks.submit("kept", make_prompt(8, 3), params_max_tokens(30));
    ranks.follower.scheduler().abort("kept");
    ASSERT_TRUE(ranks.leader.wait_for_chunks("long", 3));
    ranks.leader.scheduler().abort("long");
    ASSERT_TRUE(ranks.leader.wait_for_ends(1));
    ASSERT_TRUE(ranks.follower.wait_for_ends(1));
    EXPECT_EQ(ranks.leader.outputs["kept"].output_ids(), expected_greedy(make_prompt(8, 3), 30));
    EXPECT_EQ(ranks.follower.outputs["kept"].output_ids(), expected_greedy(make_prompt(8, 3), 30));
    EXPECT_TRUE(ranks.leader.wait_idle_and_clean());
    EXPECT_TRUE(ranks.follower.wait_idle_and_clean());
    ranks.leader.drain();
    ranks.follower.drain();
    for (Harness* rank : {&ranks.leader, &ranks.follower}) {
        EXPECT_FALSE(rank->outputs["early"].result || rank->outputs["early"].error);
        EXPECT_TRUE(rank->outputs["early"].client_chunks.empty());
        EXPECT_FALSE(rank->outputs["long"].result || rank->outputs["long"].error);
        EXPECT_EQ(rank->scheduler().stats().aborted_requests, 1u);
    }
    EXPECT_EQ(ranks.leader.scheduler().stats().steps, ranks.follower.scheduler().stats().steps);
}

TEST(ArLockstepTest, RanksWaitingForInputStreamsStillTakeRankZerosAborts) {
    TwoRanks ranks({.num_blocks = 256, .block_size = 16}, {}, /*streams=*/true);
    // Both prompts fit one step's prefill budget: each chunk gives one token.
    const auto prompt = make_prompt(6, 8);
    ranks.submit("fed", prompt, params_max_tokens(6));
    ranks.submit("held", make_prompt(9, 9), params_max_tokens(50));
    for (int i = 0; i < 2; ++i) ranks.stream("held", /*done=*/false);
    ranks.stream("fed", /*done=*/true);
    ASSERT_TRUE(ranks.leader.wait_for_ends(1));
    ASSERT_TRUE(ranks.follower.wait_for_ends(1));
    for (Harness* rank : {&ranks.leader, &ranks.follower}) {
        EXPECT_EQ(rank->outputs["fed"].output_ids(), expected_greedy(prompt, 6));
        // "held" took its two chunks and waits, on both ranks, without spinning.
        ASSERT_TRUE(rank->wait_for_chunks("held", 2));
        ASSERT_TRUE(rank->scheduler().wait_for_stats(
            [](const ArSchedulerStats& stats) { return stats.idle && stats.not_ready == 1; },
            std::chrono::seconds(60)));
    }
    // Nothing arrives any more; rank 0's abort still reaches the follower.
    ranks.leader.scheduler().abort("held");
    EXPECT_TRUE(ranks.leader.wait_idle_and_clean());
    EXPECT_TRUE(ranks.follower.wait_idle_and_clean());
    for (Harness* rank : {&ranks.leader, &ranks.follower}) {
        rank->drain();
        EXPECT_EQ(rank->outputs["held"].client_chunks.size(), 2u);
        EXPECT_FALSE(rank->outputs["held"].result || rank->outputs["held"].error);
        EXPECT_EQ(rank->scheduler().stats().aborted_requests, 1u);
    }
    EXPECT_EQ(ranks.leader.scheduler().stats().steps, ranks.follower.scheduler().stats().steps);
}

TEST(ArLockstepTest, StoppingRanksThatHoldEarlyStreamChunksEndsTheGroupCleanly) {
    TwoRanks ranks({.num_blocks = 256, .block_size = 16}, {}, /*streams=*/true);
    ranks.stream("orphan", /*done=*/false);  // a request that never comes here
    for (Harness* rank : {&ranks.leader, &ranks.follower}) {
        ASSERT_TRUE(rank->scheduler().wait_for_stats(
            [](const ArSchedulerStats& stats) { return stats.early_stream_requests == 1; },
            std::chrono::seconds(60)));
    }
    // Rank 0 must agree once more (its peer polls), not leave alone: the follower learns of
    // the stop from that agreement and leaves by itself (releasing what it held). Left alone,
    // it would wait in the collective until its own stop() cancels the group.
    ranks.leader.scheduler().stop();
    EXPECT_TRUE(ranks.follower.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) { return stats.early_stream_requests == 0; },
        std::chrono::seconds(60)));
    ranks.follower.scheduler().stop();
    EXPECT_FALSE(ranks.group.broken());
}

TEST(ArLockstepTest, StoppingRankZeroStopsTheGroupWhileBusyOrIdle) {
    {
        TwoRanks ranks;
        ranks.submit("long", make_prompt(6, 2), params_max_tokens(4000));
        ASSERT_TRUE(ranks.leader.wait_for_chunks("long", 2));
        ranks.leader.scheduler().stop();  // returns: the follower agrees to stop, and leaves
        ranks.follower.drain();
        EXPECT_FALSE(ranks.follower.outputs["long"].error.has_value());
        EXPECT_TRUE(ranks.follower.scheduler().wait_for_stats(
            [](const ArSchedulerStats& stats) { return stats.idle && stats.running == 0; },
            std::chrono::seconds(60)));
        ranks.follower.scheduler().stop();
    }
    {
        TwoRanks ranks;
        ranks.submit("short", make_prompt(6, 2), params_max_tokens(3));
        ASSERT_TRUE(ranks.leader.wait_for_ends(1));
        ASSERT_TRUE(ranks.follower.wait_for_ends(1));
        EXPECT_TRUE(ranks.leader.wait_idle_and_clean());
        EXPECT_TRUE(ranks.follower.wait_idle_and_clean());
        const std::uint64_t agreements = ranks.group.agreements();
        ranks.leader.scheduler().stop();  // idle: leaves without another agreement
        ranks.follower.scheduler().stop();
        EXPECT_EQ(ranks.group.agreements(), agreements);
    }
}

TEST(ArLockstepTest, ARankWhosePeerStoppedFailsItsRequests) {
    TwoRanks ranks;
    ranks.submit("long", make_prompt(6, 2), params_max_tokens(4000));
    ASSERT_TRUE(ranks.leader.wait_for_chunks("long", 2));
    ranks.follower.scheduler().stop();
    ASSERT_TRUE(ranks.leader.wait_for_ends(1));
    ASSERT_TRUE(ranks.leader.outputs["long"].error.has_value());
    EXPECT_EQ(ranks.leader.outputs["long"].error->code, ErrorCode::unavailable);
    EXPECT_NE(ranks.leader.outputs["long"].error->message.find("TP rank 1 stopped"),
              std::string::npos)
        << ranks.leader.outputs["long"].error->message;
    // Later requests fail at once with the same error, without the group.
    ranks.leader.submit("later", make_prompt(3, 4), params_max_tokens(2));
    ASSERT_TRUE(ranks.leader.wait_for_ends(1));
    ASSERT_TRUE(ranks.leader.outputs["later"].error.has_value());
    EXPECT_NE(ranks.leader.outputs["later"].error->message.find("TP rank 1 stopped"),
              std::string::npos);
    EXPECT_TRUE(ranks.leader.wait_idle_and_clean());
}

TEST(ArLockstepTest, AGroupThatCannotConnectFailsEveryRequest) {
    TwoRanks ranks({.num_blocks = 64, .block_size = 4},
                   Error{ErrorCode::deadline_exceeded, "rendezvous file:///x timed out"});
    ranks.submit("a", make_prompt(3, 1), params_max_tokens(2));
    ASSERT_TRUE(ranks.leader.wait_for_ends(1));
    ASSERT_TRUE(ranks.leader.outputs["a"].error.has_value());
    EXPECT_EQ(ranks.leader.outputs["a"].error->code, ErrorCode::deadline_exceeded);
    EXPECT_NE(ranks.leader.outputs["a"].error->message.find("joining the TP group"),
              std::string::npos);
    EXPECT_NE(ranks.leader.outputs["a"].error->message.find("rendezvous file:///x"),
              std::string::npos);
}

TEST(ArLockstepTest, RanksThatDivergeFailLoudly) {
    TwoRanks ranks;
    // A forward that fails on one rank only: rank 1's request fails, rank 0's goes on until the
    // next agreement sees different states.
    ranks.follower.model().fail_next_forward();
    ranks.submit("a", make_prompt(5, 1), params_max_tokens(50));
    ASSERT_TRUE(ranks.leader.wait_for_ends(1));
    ASSERT_TRUE(ranks.leader.outputs["a"].error.has_value());
    EXPECT_NE(ranks.leader.outputs["a"].error->message.find("diverged"), std::string::npos)
        << ranks.leader.outputs["a"].error->message;
    EXPECT_TRUE(ranks.leader.wait_idle_and_clean());
    EXPECT_TRUE(ranks.follower.wait_idle_and_clean());
}

TEST(ArLockstepTest, StopCancelsACollectiveWhosePeersNeverCome) {
    MemoryGroup group(2);
    // Rank 1 never runs: rank 0 waits in connect() until stop() cancels after the grace.
    Harness leader(ArEngineConfig{.lockstep = std::make_shared<MemoryLockstep>(group, 0, 2),
                                  .lockstep_stop_grace = std::chrono::milliseconds(50)},
                   {.num_blocks = 16, .block_size = 4});
    leader.submit("a", make_prompt(3, 1), params_max_tokens(2));
    leader.scheduler().stop();
    leader.drain();
    EXPECT_FALSE(leader.outputs["a"].result.has_value());
}

}  // namespace
}  // namespace omnirt::engine::testing
