// Tensor-parallel Qwen3 over a real c10d (Gloo) group: ranks are threads of this process that
// meet through a file:// rendezvous in a private temporary directory.
//   * shards: heads, kv heads (split or replicated), MLP / expert widths and vocabulary rows per
//     rank, and clear refusals of sizes that do not split;
//   * forward: the logits of tp = 2 and 4 match tp = 1 (dense, MoE, replicated kv heads, a
//     vocabulary that does not divide, attention biases, untied head), identical on every rank;
//   * engine: ArSchedulers of two ranks in lockstep over a generated checkpoint (dense and MoE)
//     give the same greedy tokens as one rank, for a batch with chunked prompts and prefix-cache
//     hits; unseeded sampling is the same on both ranks;
//   * failures: a rank alone times out joining, and a rank whose peer is gone fails its
//     requests, both with clear errors.
#include "engine/tp_communicator.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "engine/ar_scheduler.h"
#include "models/qwen3/make_checkpoint.h"
#include "models/qwen3/qwen3_model.h"
#include "models/qwen3_test_support.h"

namespace omnirt::models::qwen3 {
namespace {

namespace fs = std::filesystem;
using engine::C10dTpGroup;
using engine::TpCollectiveError;
using testing::lookup_of;
using testing::random_weights;
using testing::tiny_config;
using testing::WeightMap;

// A private directory, removed with everything in it.
class TempDir {
  public:
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "omnirt-tp-XXXXXX").string();
        OMNI_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp");
        path_ = pattern;
    }
    ~TempDir() { fs::remove_all(path_); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const fs::path& path() const { return path_; }

  private:
    fs::path path_;
};

// Runs body(rank) for every rank on a thread of its own.
void run_ranks(int size, const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < size; ++rank) threads.emplace_back(body, rank);
    for (std::thread& thread : threads) thread.join();
}

std::shared_ptr<C10dTpGroup> make_group(
    const fs::path& directory, const std::string& store, int rank, int size,
    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    auto group = C10dTpGroup::create({.name = "test",
                                      .rank = rank,
                                      .size = size,
                                      .rendezvous = "file://" + (directory / store).string(),
                                      .timeout = timeout});
    OMNI_CHECK(group.has_value(), group ? "" : group.error().to_string());
    return *group;
}

// ---- shards ----

TEST(Qwen3TensorParallelTest, ShardsSplitHeadsWidthsAndVocabulary) {
    const Qwen3Config config = tiny_config();  // 4 heads, 2 kv heads, intermediate 128
    auto second = qwen3_shard(config, 1, 2);
    ASSERT_TRUE(second.has_value()) << second.error().to_string();
    EXPECT_EQ(second->heads, 2);
    EXPECT_EQ(second->first_head, 2);
    EXPECT_EQ(second->kv_heads, 1);
    EXPECT_EQ(second->first_kv_head, 1);
    EXPECT_EQ(second->intermediate, 64);
    EXPECT_EQ(second->vocab_shard, config.vocab_size / 2);
    EXPECT_EQ(second->vocab_begin, config.vocab_size / 2);
    EXPECT_EQ(second->vocab_rows, config.vocab_size / 2);
    // Four ranks, two kv heads: each kv head serves the two ranks of its query heads.
    for (int rank = 0; rank < 4; ++rank) {
        auto shard = qwen3_shard(config, rank, 4);
        ASSERT_TRUE(shard.has_value());
        EXPECT_EQ(shard->heads, 1);
        EXPECT_EQ(shard->kv_heads, 1);
        EXPECT_EQ(shard->first_kv_head, rank / 2);
    }
    Qwen3Config odd = config;
    odd.vocab_size = 101;
    auto last = qwen3_shard(odd, 1, 2);
    ASSERT_TRUE(last.has_value());
    EXPECT_EQ(last->vocab_shard, 51);
    EXPECT_EQ(last->vocab_rows, 50);
    auto moe = qwen3_shard(tiny_config(/*moe=*/true), 0, 2);
    ASSERT_TRUE(moe.has_value());
    EXPECT_EQ(moe->moe_intermediate, 32);
}

TEST(Qwen3TensorParallelTest, SizesThatDoNotSplitAreRefused) {
    auto expect_refused = [](const Qwen3Config& config, int size, const std::string& needle) {
        auto shard = qwen3_shard(config, 0, size);
        ASSERT_FALSE(shard.has_value()) << needle;
        EXPECT_EQ(shard.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(shard.error().message.find(needle), std::string::npos) << shard.error().message;
    };
    const Qwen3Config config = tiny_config();
    expect_refused(config, 3, "does not divide num_attention_heads 4");
    Qwen3Config kv = config;
    kv.num_attention_heads = 6;
    kv.num_key_value_heads = 3;
    expect_refused(kv, 2, "num_key_value_heads 3");
    Qwen3Config width = config;
    width.intermediate_size = 130;
    expect_refused(width, 4, "intermediate_size 130");
    Qwen3Config moe = tiny_config(/*moe=*/true);
    moe.moe_intermediate_size = 66;
    expect_refused(moe, 4, "moe_intermediate_size 66");
    Qwen3Config vocab = config;
    vocab.vocab_size = 5;
    vocab.eos_token_ids.clear();
    vocab.bos_token_id.reset();
    expect_refused(vocab, 4, "leaves the last rank no row");
}

TEST(Qwen3TensorParallelTest, ModelCreationRefusesAGroupThatDoesNotSplitTheModel) {
    TempDir directory;
    const Qwen3Config config = tiny_config();
    const WeightMap weights = random_weights(config, 3);
    auto model = Qwen3Model::create(config, lookup_of(weights),
                                    {.tensor_parallel = make_group(directory.path(), "s", 0, 3)});
    ASSERT_FALSE(model.has_value());
    EXPECT_NE(model.error().message.find("tensor parallel size 3"), std::string::npos)
        << model.error().message;
    auto group = C10dTpGroup::create({.rank = 0, .size = 2, .rendezvous = "http://x"});
    ASSERT_FALSE(group.has_value());
    EXPECT_NE(group.error().message.find("file://<path> or tcp://host:port"), std::string::npos);
}

// ---- forward ----

struct ForwardCase {
    std::string name;
    std::function<Qwen3Config()> config;
    int size = 2;
};

class Qwen3TensorParallelForward : public ::testing::TestWithParam<ForwardCase> {};

// Logits of a prefill of two sequences (one in two chunks) and of two decodes after it.
std::vector<at::Tensor> run_steps(Qwen3Model& model, std::int64_t vocab) {
    auto cache = testing::make_cache(model, 16, 4);
    const auto a = testing::token_ids(13, vocab, 1);
    const auto b = testing::token_ids(6, vocab, 2);
    using testing::block_range;
    using testing::sequence_input;
    using testing::slice;
    std::vector<std::vector<engine::SequenceInput>> steps = {
        {sequence_input("a", slice(a, 0, 8), 0, block_range(0, 4)),
         sequence_input("b", b, 0, block_range(4, 4))},
        {sequence_input("a", slice(a, 8, 13), 8, block_range(0, 4))},
        {sequence_input("a", {3}, 13, block_range(0, 4)),
         sequence_input("b", {5}, 6, block_range(4, 4))},
    };
    std::vector<at::Tensor> logits;
    for (const auto& batch : steps) {
        auto output = model.forward(batch, *cache);
        OMNI_CHECK(output.has_value(), output ? "" : output.error().to_string());
        logits.push_back(output->logits);
    }
    return logits;
}

TEST_P(Qwen3TensorParallelForward, LogitsMatchOneRankAndAreTheSameOnEveryRank) {
    const ForwardCase& param = GetParam();
    const Qwen3Config config = param.config();
    const WeightMap weights = random_weights(config, 11);
    auto single = Qwen3Model::create(config, lookup_of(weights));
    ASSERT_TRUE(single.has_value()) << single.error().to_string();
    const std::vector<at::Tensor> expected = run_steps(**single, config.vocab_size);

    TempDir directory;
    std::vector<std::vector<at::Tensor>> got(static_cast<std::size_t>(param.size));
    std::vector<int> kv_heads(static_cast<std::size_t>(param.size));
    run_ranks(param.size, [&](int rank) {
        auto group = make_group(directory.path(), "store", rank, param.size);
        auto seed = group->connect(0);
        OMNI_CHECK(seed.has_value(), seed ? "" : seed.error().to_string());
        auto model = Qwen3Model::create(config, lookup_of(weights), {.tensor_parallel = group});
        OMNI_CHECK(model.has_value(), model ? "" : model.error().to_string());
        kv_heads[static_cast<std::size_t>(rank)] = (*model)->kv_spec().num_kv_heads;
        got[static_cast<std::size_t>(rank)] = run_steps(**model, config.vocab_size);
    });
    const std::int64_t kv = config.num_key_value_heads;
    for (int rank = 0; rank < param.size; ++rank) {
        EXPECT_EQ(kv_heads[static_cast<std::size_t>(rank)],
                  kv % param.size == 0 ? kv / param.size : 1);
        for (std::size_t step = 0; step < expected.size(); ++step) {
            const at::Tensor& logits = got[static_cast<std::size_t>(rank)][step];
            testing::expect_close(logits, expected[step], 1e-4,
                                  "rank " + std::to_string(rank) + " step " + std::to_string(step));
            EXPECT_TRUE(at::equal(logits, got[0][step])) << "rank " << rank << " step " << step;
            EXPECT_TRUE(at::equal(logits.argmax(1), expected[step].argmax(1)));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Qwen3TensorParallelForward,
    ::testing::Values(ForwardCase{"DenseTied", [] { return tiny_config(); }},
                      ForwardCase{"Moe", [] { return tiny_config(/*moe=*/true); }},
                      ForwardCase{"ReplicatedKvHeads",
                                  [] {
                                      Qwen3Config config = tiny_config();
                                      config.num_key_value_heads = 1;
                                      return config;
                                  }},
                      ForwardCase{"OddVocabularyBiasesUntied",
                                  [] {
                                      Qwen3Config config = tiny_config();
                                      config.vocab_size -= 3;
                                      config.attention_bias = true;
                                      config.tie_word_embeddings = false;
                                      return config;
                                  }},
                      ForwardCase{"FourRanksReplicatedKvHeads", [] { return tiny_config(); }, 4}),
    [](const auto& info) { return info.param.name; });

// ---- engine ----

struct Request {
    std::string id;
    std::vector<std::int32_t> prompt;
    std::int64_t max_tokens;
    Map sampling;
};

using Outputs = std::map<std::string, std::vector<std::int32_t>>;

std::vector<std::int32_t> output_ids(const StagePayload& result) {
    const Tensor& ids = result.data.find("output_ids")->as_tensor();
    const auto* data = ids.data_as<std::int32_t>();
    return std::vector<std::int32_t>(data, data + ids.numel());
}

// One rank's ArScheduler over the checkpoint: runs `requests` and returns the output ids of the
// finished ones (errors fail the test).
class RankEngine {
  public:
    RankEngine(const fs::path& checkpoint_dir, std::shared_ptr<C10dTpGroup> group,
               std::uint64_t seed) {
        auto checkpoint = checkpoint::Checkpoint::open(checkpoint_dir);
        OMNI_CHECK(checkpoint.has_value(), "checkpoint");
        checkpoint_ = std::move(*checkpoint);
        auto config = parse_qwen3_config(checkpoint_->config());
        OMNI_CHECK(config.has_value(), "config");
        const checkpoint::Checkpoint& weights = *checkpoint_;
        auto model = Qwen3Model::create(
            *config, [&weights](const std::string& name) { return weights.tensor(name); },
            {.tensor_parallel = group});
        OMNI_CHECK(model.has_value(), model ? "" : model.error().to_string());
        auto scheduler =
            engine::ArScheduler::create({.stage_name = "thinker",
                                         .num_kv_blocks = 64,
                                         .block_size = 4,
                                         .max_prefill_tokens = 12,  // prompts in chunks
                                         .seed = seed,
                                         .lockstep = group},
                                        std::move(*model));
        OMNI_CHECK(scheduler.has_value(), scheduler ? "" : scheduler.error().to_string());
        scheduler_ = std::move(*scheduler);
        OMNI_CHECK(scheduler_->start().has_value(), "start");
    }
    ~RankEngine() { scheduler_->stop(); }

    engine::ArScheduler& scheduler() { return *scheduler_; }

    void submit(const Request& request) {
        Map params{{"max_tokens", Value(request.max_tokens)},
                   {"sampling", Value(request.sampling)}};
        auto payload = std::make_shared<const StagePayload>(StagePayload{
            .request_id = request.id,
            .request = OmniRequest{.params = Value(std::move(params))},
            .data = Value(Map{{"input_ids", Value(Tensor::from_vector(request.prompt))}})});
        ASSERT_TRUE(scheduler_->inbox().push(
            pipeline::IncomingMessage{.request_id = request.id,
                                      .kind = pipeline::IncomingKind::new_request,
                                      .payload = std::move(payload)}));
    }

    // Results (ids) and errors of the next `count` requests that end.
    void collect(std::size_t count, Outputs& outputs, std::map<std::string, Error>& errors) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        std::size_t ended = 0;
        while (ended < count) {
            auto message = scheduler_->outbox().pop_until(deadline);
            ASSERT_TRUE(message.has_value()) << "only " << ended << " of " << count << " ended";
            if (message->kind == pipeline::OutgoingKind::result) {
                outputs[message->request_id] = output_ids(*message->result);
                ++ended;
            } else if (message->kind == pipeline::OutgoingKind::error) {
                errors.emplace(message->request_id, message->error);
                ++ended;
            }
        }
    }

  private:
    std::unique_ptr<checkpoint::Checkpoint> checkpoint_;
    std::unique_ptr<engine::ArScheduler> scheduler_;
};

std::vector<Request> engine_requests(std::int64_t vocab) {
    Map greedy{{"temperature", Value(0)}};
    const auto shared = testing::token_ids(20, vocab, 40);
    std::vector<Request> requests;
    for (int i = 0; i < 6; ++i) {
        std::vector<std::int32_t> prompt = testing::token_ids(3 + 7 * i, vocab, 50 + i);
        if (i % 2 == 1) prompt.insert(prompt.begin(), shared.begin(), shared.end());
        requests.push_back({"greedy-" + std::to_string(i), prompt, 6 + 3 * i, greedy});
    }
    requests.push_back({"sampled", testing::token_ids(9, vocab, 90), 16,
                        Map{{"temperature", Value(0.8)}, {"top_k", Value(20)}}});
    return requests;
}

class Qwen3TensorParallelEngine : public ::testing::TestWithParam<bool> {
  protected:
    void SetUp() override {
        auto made = make_checkpoint(checkpoint_.path() / "model", {.preset = "tiny",
                                                                   .moe = GetParam(),
                                                                   .seed = 21,
                                                                   .dtype = DType::f32,
                                                                   .init_std = 0.15});
        ASSERT_TRUE(made.has_value()) << made.error().to_string();
        config_ = made->config;
    }
    fs::path model_dir() const { return checkpoint_.path() / "model"; }

    TempDir checkpoint_;
    Qwen3Config config_;
};

TEST_P(Qwen3TensorParallelEngine, TwoRanksGiveTheGreedyTokensOfOne) {
    const std::vector<Request> requests = engine_requests(config_.vocab_size);
    Outputs single;
    {
        std::map<std::string, Error> errors;
        auto checkpoint = checkpoint::Checkpoint::open(model_dir());
        ASSERT_TRUE(checkpoint.has_value());
        const checkpoint::Checkpoint& weights = **checkpoint;
        auto model = Qwen3Model::create(
            config_, [&weights](const std::string& name) { return weights.tensor(name); });
        ASSERT_TRUE(model.has_value());
        auto scheduler = engine::ArScheduler::create({.stage_name = "thinker",
                                                      .num_kv_blocks = 64,
                                                      .block_size = 4,
                                                      .max_prefill_tokens = 12,
                                                      .seed = 5},
                                                     std::move(*model));
        ASSERT_TRUE(scheduler.has_value());
        ASSERT_TRUE((*scheduler)->start().has_value());
        for (const Request& request : requests) {
            Map params{{"max_tokens", Value(request.max_tokens)},
                       {"sampling", Value(request.sampling)}};
            ASSERT_TRUE((*scheduler)
                            ->inbox()
                            .push(pipeline::IncomingMessage{
                                .request_id = request.id,
                                .payload = std::make_shared<const StagePayload>(StagePayload{
                                    .request_id = request.id,
                                    .request = OmniRequest{.params = Value(std::move(params))},
                                    .data = Value(Map{{"input_ids", Value(Tensor::from_vector(
                                                                        request.prompt))}})})}));
        }
        std::size_t ended = 0;
        while (ended < requests.size()) {
            auto message =
                (*scheduler)
                    ->outbox()
                    .pop_until(std::chrono::steady_clock::now() + std::chrono::seconds(120));
            ASSERT_TRUE(message.has_value());
            if (message->kind == pipeline::OutgoingKind::stream) continue;
            ASSERT_EQ(message->kind, pipeline::OutgoingKind::result) << message->error.to_string();
            single[message->request_id] = output_ids(*message->result);
            ++ended;
        }
        (*scheduler)->stop();
    }

    // The ranks' engines connect on their own threads; rank 0 stops first, as in a TP stage.
    TempDir rendezvous;
    std::vector<std::unique_ptr<RankEngine>> ranks;
    for (int rank = 0; rank < 2; ++rank) {
        // Different seed options: the ranks share rank 0's seed state anyway.
        ranks.push_back(std::make_unique<RankEngine>(
            model_dir(), make_group(rendezvous.path(), "store", rank, 2), rank == 0 ? 5 : 6));
    }
    for (const Request& request : requests) {
        ranks[1]->submit(request);  // like rank 0's TP leader: the follower first
        ranks[0]->submit(request);
    }
    std::vector<Outputs> outputs(2);
    std::vector<std::map<std::string, Error>> errors(2);
    for (int rank = 0; rank < 2; ++rank) {
        const auto r = static_cast<std::size_t>(rank);
        ranks[r]->collect(requests.size(), outputs[r], errors[r]);
        EXPECT_TRUE(ranks[r]->scheduler().wait_for_stats(
            [](const engine::ArSchedulerStats& stats) { return stats.idle; },
            std::chrono::seconds(60)));
    }
    EXPECT_EQ(ranks[0]->scheduler().stats().steps, ranks[1]->scheduler().stats().steps);
    EXPECT_GT(ranks[0]->scheduler().stats().prefix_hit_tokens, 0u);
    ranks.clear();
    for (int rank = 0; rank < 2; ++rank) {
        const auto r = static_cast<std::size_t>(rank);
        for (const auto& [id, error] : errors[r]) ADD_FAILURE() << id << ": " << error.to_string();
        for (const Request& request : requests) {
            ASSERT_TRUE(outputs[r].contains(request.id)) << request.id;
            EXPECT_EQ(outputs[r][request.id].size(), static_cast<std::size_t>(request.max_tokens));
            if (request.id == "sampled") {
                EXPECT_EQ(outputs[r][request.id], outputs[0][request.id]) << "rank " << rank;
            } else {
                EXPECT_EQ(outputs[r][request.id], single[request.id])
                    << request.id << " on rank " << rank;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, Qwen3TensorParallelEngine, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Moe" : "Dense"; });

// ---- failures ----

TEST(Qwen3TensorParallelFailures, ARankAloneTimesOutJoiningWithAClearError) {
    TempDir directory;
    auto group = make_group(directory.path(), "store", 0, 2, std::chrono::milliseconds(500));
    auto seed = group->connect(1);
    ASSERT_FALSE(seed.has_value());
    EXPECT_EQ(seed.error().code, ErrorCode::deadline_exceeded) << seed.error().to_string();
    EXPECT_NE(seed.error().message.find("did not all join"), std::string::npos);
    EXPECT_NE(seed.error().message.find("file://"), std::string::npos);
    // Collectives of a group that never connected fail at once.
    at::Tensor values = at::ones({4});
    EXPECT_THROW(group->all_reduce_sum(values), TpCollectiveError);
}

TEST(Qwen3TensorParallelFailures, ARankWhosePeerIsGoneFailsItsRequests) {
    TempDir directory;
    TempDir checkpoint_dir;
    auto made = make_checkpoint(checkpoint_dir.path() / "model",
                                {.preset = "tiny", .seed = 3, .dtype = DType::f32});
    ASSERT_TRUE(made.has_value());
    const Request first{"first", testing::token_ids(5, made->config.vocab_size, 1), 3,
                        Map{{"temperature", Value(0)}}};
    const Request second{"second", testing::token_ids(5, made->config.vocab_size, 2), 3,
                         Map{{"temperature", Value(0)}}};
    std::vector<std::unique_ptr<RankEngine>> ranks;
    for (int rank = 0; rank < 2; ++rank) {
        ranks.push_back(std::make_unique<RankEngine>(
            checkpoint_dir.path() / "model", make_group(directory.path(), "store", rank, 2), 0));
    }
    for (auto& rank : ranks) rank->submit(first);
    for (auto& rank : ranks) {
        Outputs outputs;
        std::map<std::string, Error> errors;
        rank->collect(1, outputs, errors);
        EXPECT_TRUE(outputs.contains("first"));
        EXPECT_TRUE(rank->scheduler().wait_for_stats(
            [](const engine::ArSchedulerStats& stats) { return stats.idle; },
            std::chrono::seconds(60)));
    }
    // Both ranks are idle; rank 1 goes away with its process group (its sockets close).
    ranks[1].reset();
    std::unique_ptr<RankEngine> survivor = std::move(ranks[0]);
    // Only rank 0 gets the next request: its agreement finds the peer gone.
    survivor->submit(second);
    Outputs outputs;
    std::map<std::string, Error> errors;
    survivor->collect(1, outputs, errors);
    ASSERT_TRUE(errors.contains("second"));
    EXPECT_EQ(errors.at("second").code, ErrorCode::unavailable) << errors.at("second").to_string();
    EXPECT_NE(errors.at("second").message.find("(TP rank 0 of 2): test TP group"),
              std::string::npos)
        << errors.at("second").message;
    survivor.reset();
}

}  // namespace
}  // namespace omnirt::models::qwen3
