#pragma once
// Drives an ArScheduler over the FakeModel: submits requests into its inbox and collects what
// leaves its outbox, per request.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/ar_scheduler.h"
#include "engine/fake_model.h"

namespace omnirt::engine::testing {

inline std::vector<std::int32_t> tensor_ids(const Value& value) {
    const Tensor* tensor = value.if_tensor();
    if (tensor == nullptr || tensor->dtype() != DType::i32) return {};
    const auto* data = tensor->data_as<std::int32_t>();
    return std::vector<std::int32_t>(data, data + tensor->numel());
}

// Deterministic prompt tokens in [0, kFakeVocab - 1).
inline std::vector<std::int32_t> make_prompt(std::size_t length, std::uint64_t seed) {
    std::vector<std::int32_t> out;
    std::uint64_t state = seed * 2654435761ULL + 17;
    for (std::size_t i = 0; i < length; ++i) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        out.push_back(static_cast<std::int32_t>((state >> 33) % (kFakeVocab - 1)));
    }
    return out;
}

inline Value params_max_tokens(std::int64_t max_tokens,
                               Map sampling = {{"temperature", Value(0)}}) {
    return Value(Map{{"max_tokens", Value(max_tokens)}, {"sampling", Value(std::move(sampling))}});
}

struct RequestOutput {
    std::vector<Value> client_chunks;
    std::map<std::string, std::vector<Value>> target_chunks;
    std::optional<StagePayload> result;
    std::optional<Error> error;

    [[nodiscard]] std::vector<std::int32_t> output_ids() const {
        if (!result) return {};
        const Value* ids = result->data.find("output_ids");
        return ids == nullptr ? std::vector<std::int32_t>{} : tensor_ids(*ids);
    }
    [[nodiscard]] std::string text() const {
        const Value* text = result ? result->data.find("text") : nullptr;
        return text != nullptr && text->is_string() ? text->as_string() : "";
    }
    [[nodiscard]] std::string finish_reason() const {
        const Value* reason = result ? result->data.find("finish_reason") : nullptr;
        return reason != nullptr && reason->is_string() ? reason->as_string() : "";
    }
    [[nodiscard]] std::vector<std::int32_t> streamed_ids() const {
        std::vector<std::int32_t> out;
        for (const Value& chunk : client_chunks) {
            out.push_back(static_cast<std::int32_t>(chunk.find("token_id")->as_int()));
        }
        return out;
    }
    [[nodiscard]] std::string streamed_text() const {
        std::string out;
        for (const Value& chunk : client_chunks) {
            if (const Value* text = chunk.find("text")) out += text->as_string();
        }
        return out;
    }
};

class Harness {
  public:
    struct Config {
        std::int32_t num_blocks = 256;
        std::int32_t block_size = 4;
        std::int64_t max_positions = 4096;
    };

    Harness(ArEngineConfig options, Config config, std::unique_ptr<ArRole> role = nullptr,
            std::unique_ptr<DepthModel> depth = nullptr) {
        auto model =
            std::make_unique<FakeModel>(config.num_blocks, config.block_size, config.max_positions);
        model_ = model.get();
        options.num_kv_blocks = config.num_blocks;
        options.block_size = config.block_size;
        if (options.stage_name.empty()) options.stage_name = "thinker";
        auto created = ArScheduler::create(std::move(options), std::move(model), std::move(role),
                                           std::move(depth));
        EXPECT_TRUE(created.has_value()) << created.error().to_string();
        scheduler_ = std::move(*created);
        EXPECT_TRUE(scheduler_->start().has_value());
        total_blocks_ = static_cast<std::size_t>(config.num_blocks);
    }
    ~Harness() {
        scheduler_->stop();
        // Every request the runner opened was closed, and the model saw nothing wrong.
        EXPECT_EQ(model_->open_requests(), 0u);
        EXPECT_EQ(model_->first_violation(), "");
    }

    FakeModel& model() { return *model_; }
    ArScheduler& scheduler() { return *scheduler_; }

    void submit(const std::string& id, const std::vector<std::int32_t>& prompt, Value params,
                Map extra_data = {}) {
        push(request(id, prompt, std::move(params), std::move(extra_data)));
    }
    void submit_payload(const std::string& id, StagePayload payload) {
        push(pipeline::IncomingMessage{
            .request_id = id,
            .kind = pipeline::IncomingKind::new_request,
            .payload = std::make_shared<const StagePayload>(std::move(payload))});
    }
    // A new request's message, stamped with its arrival time now; push() hands it over.
    static pipeline::IncomingMessage request(const std::string& id,
                                             const std::vector<std::int32_t>& prompt, Value params,
                                             Map extra_data = {}) {
        Map data = std::move(extra_data);
        data.insert_or_assign("input_ids", Value(Tensor::from_vector(prompt)));
        return pipeline::IncomingMessage{
            .request_id = id,
            .kind = pipeline::IncomingKind::new_request,
            .payload = std::make_shared<const StagePayload>(
                StagePayload{.request_id = id,
                             .request = OmniRequest{.params = std::move(params)},
                             .data = Value(std::move(data))})};
    }
    void push(pipeline::IncomingMessage message) {
        ASSERT_TRUE(scheduler_->inbox().push(std::move(message)));
    }

    // Collects outbox messages until `count` more requests ended (result or error).
    ::testing::AssertionResult wait_for_ends(
        std::size_t count, std::chrono::seconds timeout = std::chrono::seconds(120)) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        const std::size_t target = ended_ + count;
        while (ended_ < target) {
            auto message = scheduler_->outbox().pop_until(deadline);
            if (!message) {
                return ::testing::AssertionFailure()
                       << "only " << ended_ << " of " << target << " requests ended";
            }
            take(std::move(*message));
        }
        return ::testing::AssertionSuccess();
    }
    // Collects until request `id` has `count` client chunks.
    ::testing::AssertionResult wait_for_chunks(const std::string& id, std::size_t count) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (outputs[id].client_chunks.size() < count) {
            auto message = scheduler_->outbox().pop_until(deadline);
            if (!message) return ::testing::AssertionFailure() << "no chunk for " << id;
            take(std::move(*message));
        }
        return ::testing::AssertionSuccess();
    }
    // Takes whatever is in the outbox now.
    void drain() {
        while (auto message = scheduler_->outbox().try_pop()) take(std::move(*message));
    }

    // Idle, and every block is free or held by the prefix cache only.
    ::testing::AssertionResult wait_idle_and_clean() {
        const std::size_t total = total_blocks_;
        const bool clean = scheduler_->wait_for_stats(
            [total](const ArSchedulerStats& stats) {
                return stats.idle && stats.running == 0 && stats.waiting == 0 &&
                       stats.free_blocks + stats.cached_blocks == total;
            },
            std::chrono::seconds(60));
        if (clean) return ::testing::AssertionSuccess();
        const ArSchedulerStats stats = scheduler_->stats();
        return ::testing::AssertionFailure()
               << "not clean: idle " << stats.idle << ", running " << stats.running << ", waiting "
               << stats.waiting << ", free " << stats.free_blocks << ", cached "
               << stats.cached_blocks << " of " << total;
    }

    std::map<std::string, RequestOutput> outputs;

  private:
    void take(pipeline::OutgoingMessage message) {
        RequestOutput& output = outputs[message.request_id];
        switch (message.kind) {
            case pipeline::OutgoingKind::stream:
                if (message.target) {
                    output.target_chunks[*message.target].push_back(message.chunk->chunk);
                } else {
                    EXPECT_EQ(message.chunk->chunk_id,
                              static_cast<std::int64_t>(output.client_chunks.size()));
                    output.client_chunks.push_back(message.chunk->chunk);
                }
                break;
            case pipeline::OutgoingKind::result:
                EXPECT_FALSE(output.result.has_value()) << "two results for " << message.request_id;
                output.result = *message.result;
                ++ended_;
                break;
            case pipeline::OutgoingKind::error:
                output.error = message.error;
                ++ended_;
                break;
        }
    }

    FakeModel* model_ = nullptr;
    std::unique_ptr<ArScheduler> scheduler_;
    std::size_t total_blocks_ = 0;
    std::size_t ended_ = 0;
};

}  // namespace omnirt::engine::testing
