// S2-Pro on the AR engine (slow AR + fast AR depth model + S2ProRole): greedy generation equals
// the direct reference loop of fact sheet section 6.1 (constrained semantic token, 10 codes per
// frame, frame embedding fed back); the same request gives the same codes again, alone or
// batched with others, greedy or sampled with a seed; every token obeys the section 4.5
// constraint; malformed reference codes fail the request.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "engine/ar_scheduler.h"
#include "models/s2_pro/tts_role.h"
#include "s2_pro_test_support.h"

namespace omnirt::models::s2_pro {
namespace {

using namespace testing;

struct Output {
    std::vector<std::int32_t> tokens;
    std::vector<std::vector<std::int32_t>> codes;  // [frames][11]
    std::optional<Error> error;
};

struct Request {
    std::string id;
    std::vector<std::int32_t> prompt;
    std::vector<std::int64_t> vq_positions;
    std::vector<std::int64_t> vq_codes;  // [frames * 10]
    Map sampling{{"temperature", Value(0)}};
    std::optional<std::int64_t> seed;
    std::int64_t max_tokens = 5;
    bool empty_vq = false;  // send empty vq_positions / vq_codes tensors
};

class Engine {
  public:
    Engine(const S2ProConfig& config, const WeightMap& weights, bool sample_depth = false) {
        auto model = load_s2_pro_model(config, lookup_of(weights), at::kFloat, at::kCPU);
        OMNI_CHECK(model.has_value(), model.has_value() ? "" : model.error().to_string().c_str());
        engine::SamplingParams greedy;
        greedy.temperature = 0;
        engine::SamplingParams depth;
        depth.temperature = sample_depth ? 0.8 : 0.0;
        depth.top_k = 30;
        engine::ArEngineConfig options{
            .stage_name = "tts",
            .num_kv_blocks = 64,
            .block_size = 8,
            .max_running_requests = 8,
            .max_prefill_tokens = 256,
            .default_sampling = greedy,
            .depth_sampling = {depth},
            .eos_token_ids = {static_cast<std::int32_t>(config.ids.im_end)},
            .stream_to_client = false,
            .seed = 99};
        auto role = std::make_unique<S2ProRole>(model->embedder);
        auto created = engine::ArScheduler::create(std::move(options), std::move(model->slow),
                                                   std::move(role), std::move(model->fast));
        OMNI_CHECK(created.has_value(), "scheduler");
        scheduler_ = std::move(*created);
        OMNI_CHECK(scheduler_->start().has_value(), "start");
    }
    ~Engine() { scheduler_->stop(); }

    // Submits all, waits for all.
    std::map<std::string, Output> run(const std::vector<Request>& requests) {
        for (const Request& request : requests) {
            Map data{{"input_ids", Value(Tensor::from_vector(request.prompt))}};
            if (!request.vq_positions.empty() || request.empty_vq) {
                data.emplace("vq_positions", Value(Tensor::from_vector(request.vq_positions)));
                data.emplace("vq_codes", Value(Tensor::from_vector(request.vq_codes)));
            }
            Map params{{"max_tokens", Value(request.max_tokens)},
                       {"sampling", Value(request.sampling)}};
            if (request.seed) params.emplace("seed", Value(*request.seed));
            StagePayload payload{.request_id = request.id,
                                 .request = OmniRequest{.params = Value(std::move(params))},
                                 .data = Value(std::move(data))};
            OMNI_CHECK(scheduler_->inbox().push(pipeline::IncomingMessage{
                           .request_id = request.id,
                           .kind = pipeline::IncomingKind::new_request,
                           .payload = std::make_shared<const StagePayload>(std::move(payload))}),
                       "push");
        }
        std::map<std::string, Output> out;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
        std::size_t ended = 0;
        while (ended < requests.size()) {
            auto message = scheduler_->outbox().pop_until(deadline);
            if (!message) {
                ADD_FAILURE() << "requests did not end";
                break;
            }
            Output& output = out[message->request_id];
            if (message->kind == pipeline::OutgoingKind::error) {
                output.error = message->error;
                ++ended;
            } else if (message->kind == pipeline::OutgoingKind::result) {
                const Value& data = message->result->data;
                const Tensor* ids = data.find("output_ids")->if_tensor();
                output.tokens.assign(ids->data_as<std::int32_t>(),
                                     ids->data_as<std::int32_t>() + ids->numel());
                if (const Value* codes = data.find("codes")) {
                    const Tensor* table = codes->if_tensor();
                    const std::int64_t width = table->shape()[1];
                    for (std::int64_t f = 0; f < table->shape()[0]; ++f) {
                        const std::int32_t* row = table->data_as<std::int32_t>() + f * width;
                        output.codes.emplace_back(row, row + width);
                    }
                }
                ++ended;
            }
        }
        return out;
    }

  private:
    std::unique_ptr<engine::ArScheduler> scheduler_;
};

// A prompt like build_prompt's: text ids, a reference of 3 frames, then the open turn.
Request reference_request(const std::string& id, std::int32_t base) {
    Request request{.id = id, .prompt = {151644, 8948, 198, 10 + base, 20, 30}};
    for (std::int64_t f = 0; f < 3; ++f) {
        request.vq_positions.push_back(static_cast<std::int64_t>(request.prompt.size()));
        const std::int64_t c0 = (base * 37 + f * 11) % 4096;
        request.prompt.push_back(static_cast<std::int32_t>(151678 + c0));
        request.vq_codes.push_back(c0);
        for (std::int64_t k = 1; k < 10; ++k)
            request.vq_codes.push_back((base + 13 * f + k) % 1024);
    }
    for (std::int32_t id_ : {151645, 198, 151644, 77091, 198, 151673})
        request.prompt.push_back(id_);
    return request;
}

void expect_constrained(const S2ProConfig& config, const Output& output) {
    for (std::size_t i = 0; i < output.tokens.size(); ++i) {
        const std::int32_t token = output.tokens[i];
        EXPECT_TRUE(config.ids.is_semantic(token) || token == config.ids.im_end) << token;
        if (i < output.codes.size()) {
            ASSERT_EQ(output.codes[i].size(), 11u);
            EXPECT_EQ(output.codes[i][0], token);
            EXPECT_EQ(output.codes[i][1], token - config.ids.semantic_begin);
        }
    }
}

class S2ProEngineTest : public ::testing::Test {
  protected:
    S2ProConfig config_ = tiny_config();
    WeightMap weights_ = random_weights(config_, 21);
};

TEST_F(S2ProEngineTest, GreedyGenerationEqualsTheReferenceLoop) {
    Engine engine(config_, weights_);
    const Request request = reference_request("a", 5);
    auto out = engine.run({request});
    ASSERT_FALSE(out["a"].error.has_value()) << out["a"].error->to_string();
    std::map<std::int64_t, std::vector<std::int64_t>> vq;
    for (std::size_t j = 0; j < request.vq_positions.size(); ++j) {
        vq[request.vq_positions[j]] = std::vector<std::int64_t>(
            request.vq_codes.begin() + static_cast<std::ptrdiff_t>(j * 10),
            request.vq_codes.begin() + static_cast<std::ptrdiff_t>(j * 10 + 10));
    }
    const reference::Frames expected =
        reference::generate(weights_, config_, request.prompt, vq, request.max_tokens);
    EXPECT_EQ(expected.codes.size(), 5u);  // five frames to compare, no early stop
    ASSERT_EQ(out["a"].tokens.size(), expected.tokens.size());
    for (std::size_t i = 0; i < expected.tokens.size(); ++i) {
        EXPECT_EQ(out["a"].tokens[i], expected.tokens[i]) << "frame " << i;
    }
    ASSERT_EQ(out["a"].codes.size(), expected.codes.size());
    for (std::size_t f = 0; f < expected.codes.size(); ++f) {
        for (std::size_t k = 0; k < 10; ++k) {
            EXPECT_EQ(out["a"].codes[f][k + 1], expected.codes[f][k]) << "frame " << f << " " << k;
        }
    }
    expect_constrained(config_, out["a"]);
}

TEST_F(S2ProEngineTest, GreedyIsDeterministicAndAloneEqualsBatched) {
    Engine engine(config_, weights_);
    auto alone = engine.run({reference_request("a", 5)});
    Request plain{.id = "p", .prompt = {151644, 872, 198, 40, 41, 151645, 151644, 151673}};
    Request empty = plain;  // empty vq tensors: no reference frames, as without them
    empty.id = "e";
    empty.empty_vq = true;
    auto batched = engine.run({reference_request("b", 9), reference_request("a", 5), plain,
                               reference_request("c", 5), empty});
    ASSERT_FALSE(alone["a"].error.has_value());
    for (const char* id : {"a", "b", "c", "p"}) {
        ASSERT_FALSE(batched[id].error.has_value()) << id << ": " << batched[id].error->to_string();
        expect_constrained(config_, batched[id]);
    }
    EXPECT_EQ(batched["a"].tokens, alone["a"].tokens);
    EXPECT_EQ(batched["a"].codes, alone["a"].codes);
    EXPECT_EQ(batched["c"].codes, alone["a"].codes);  // same request under another id
    EXPECT_NE(batched["b"].codes, alone["a"].codes);  // other reference codes, other speech
    ASSERT_FALSE(batched["e"].error.has_value()) << batched["e"].error->to_string();
    EXPECT_EQ(batched["e"].tokens, batched["p"].tokens);
    EXPECT_EQ(batched["e"].codes, batched["p"].codes);
}

TEST_F(S2ProEngineTest, PrefixCacheKeysOnResidualCodesToo) {
    // Same ids (so the same semantic codes), other residual codes: the prompt's embeddings
    // differ, so the cached KV blocks of the first request must not serve the second.
    Engine engine(config_, weights_);
    auto first = engine.run({reference_request("a", 5)});
    Request other = reference_request("d", 5);
    for (std::size_t i = 0; i < other.vq_codes.size(); ++i) {
        if (i % 10 != 0) other.vq_codes[i] = (other.vq_codes[i] + 500) % 1024;
    }
    auto second = engine.run({other});
    ASSERT_FALSE(second["d"].error.has_value());
    EXPECT_NE(second["d"].codes, first["a"].codes);
    const reference::Frames expected = [&] {
        std::map<std::int64_t, std::vector<std::int64_t>> vq;
        for (std::size_t j = 0; j < other.vq_positions.size(); ++j) {
            vq[other.vq_positions[j]] = std::vector<std::int64_t>(
                other.vq_codes.begin() + static_cast<std::ptrdiff_t>(j * 10),
                other.vq_codes.begin() + static_cast<std::ptrdiff_t>(j * 10 + 10));
        }
        return reference::generate(weights_, config_, other.prompt, vq, other.max_tokens);
    }();
    ASSERT_EQ(second["d"].codes.size(), expected.codes.size());
    for (std::size_t f = 0; f < expected.codes.size(); ++f) {
        EXPECT_EQ(second["d"].codes[f][1 + 9], expected.codes[f][9]) << "frame " << f;
    }
}

TEST_F(S2ProEngineTest, SameSeedSameCodesAloneAndBatched) {
    Engine engine(config_, weights_, /*sample_depth=*/true);
    auto seeded = [](const std::string& id, std::int64_t seed) {
        Request request = reference_request(id, 5);
        request.sampling = Map{{"temperature", Value(0.8)}, {"top_k", Value(30)}};
        request.seed = seed;
        return request;
    };
    auto first = engine.run({seeded("a", 7)});
    auto again = engine.run({seeded("b", 9), seeded("a", 7), seeded("c", 7)});
    ASSERT_FALSE(first["a"].error.has_value());
    EXPECT_EQ(again["a"].codes, first["a"].codes);
    EXPECT_EQ(again["c"].codes, first["a"].codes);
    EXPECT_EQ(again["a"].tokens, first["a"].tokens);
    EXPECT_NE(again["b"].codes, first["a"].codes);
    expect_constrained(config_, again["b"]);
}

TEST_F(S2ProEngineTest, MalformedReferenceCodesFailTheRequestOnly) {
    Engine engine(config_, weights_);
    Request big = reference_request("big", 1);
    big.vq_codes[4] = 4096;
    Request shape = reference_request("shape", 1);
    shape.vq_codes.pop_back();
    Request place = reference_request("place", 1);
    place.vq_positions[0] = 0;  // <|im_start|> is not a semantic token
    Request order = reference_request("order", 1);
    std::swap(order.vq_positions[0], order.vq_positions[1]);
    auto out = engine.run({big, shape, place, order, reference_request("fine", 1)});
    for (const char* id : {"big", "shape", "place", "order"}) {
        ASSERT_TRUE(out[id].error.has_value()) << id;
        EXPECT_EQ(out[id].error->code, ErrorCode::invalid_argument) << id;
        EXPECT_NE(out[id].error->message.find("vq_"), std::string::npos) << out[id].error->message;
    }
    EXPECT_FALSE(out["fine"].error.has_value());
}

}  // namespace
}  // namespace omnirt::models::s2_pro
