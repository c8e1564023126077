// EncoderBatcher with a fake encoder: a failing batched forward is retried per request so that
// only the request that makes the encoder fail fails, an exception becomes an internal error,
// the cache and the in-batch deduplication cut the forward's items.
#include "models/qwen3_omni/encoder_batch.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

constexpr std::int64_t kFailingKey = 666;
constexpr std::int64_t kThrowingKey = 777;

// Items {key, x float32 [n]} -> {y = 2 x}; a forward holding kFailingKey fails, one holding
// kThrowingKey throws.
class DoublingEncoder final : public ItemEncoder {
  public:
    Result<EncoderInput> parse(const Value& item) const override {
        const Value* x = item.find("x");
        if (x == nullptr || !x->is_tensor())
            return fail(ErrorCode::invalid_argument, "'x' missing");
        return EncoderInput{.input = torch_bridge::to_torch(x->as_tensor())};
    }
    Result<std::vector<Map>> encode(std::span<const EncoderInput* const> inputs) const override {
        std::vector<Map> out;
        for (const EncoderInput* input : inputs) {
            if (input->key == kFailingKey) return fail(ErrorCode::internal, "fake failure");
            if (input->key == kThrowingKey) throw std::runtime_error("fake exception");
            auto y = torch_bridge::from_torch(input->input * 2);
            out.push_back(Map{{"y", Value(*y)}});
        }
        return out;
    }
};

pipeline::BatchItem request(const std::string& id, const std::vector<std::int64_t>& keys) {
    List items;
    for (std::int64_t key : keys) {
        items.push_back(Value(
            Map{{"key", Value(key)},
                {"x", Value(Tensor::from_vector(std::vector<float>{float(key), 1.0f}, {2}))}}));
    }
    return pipeline::BatchItem{
        .input = std::make_shared<const StagePayload>(StagePayload{
            .request_id = id, .data = Value(Map{{"items", Value(std::move(items))}})})};
}

struct Fixture {
    std::shared_ptr<EncoderStageCounters> counters = std::make_shared<EncoderStageCounters>();
    EncoderBatcher batcher{"stage 'fake'", std::make_unique<DoublingEncoder>(), 1 << 20,
                           EncoderStageHooks{.counters = counters}};
};

TEST(EncoderBatcher, FailingForwardFailsOnlyTheRequestThatCausesIt) {
    Fixture f;
    auto results = f.batcher.run({request("a", {1}), request("b", {kFailingKey, 3}),
                                  request("c", {1, 2}), request("d", {kThrowingKey})});
    ASSERT_EQ(results.size(), 4u);
    ASSERT_TRUE(results[0].has_value());
    ASSERT_FALSE(results[1].has_value());
    EXPECT_NE(results[1].error().message.find("stage 'fake': fake failure"), std::string::npos);
    ASSERT_TRUE(results[2].has_value());
    ASSERT_FALSE(results[3].has_value());
    EXPECT_EQ(results[3].error().code, ErrorCode::internal);
    EXPECT_NE(results[3].error().message.find("fake exception"), std::string::npos)
        << results[3].error().message;
    const List& c = results[2]->data.find("items")->as_list();
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(*c[1].find("key"), Value(2));
    EXPECT_TRUE(
        at::equal(torch_bridge::to_torch(c[1].find("y")->as_tensor()), at::tensor({4.0f, 2.0f})));
    // The batch, then a alone (key 1), b, c (only key 2: 1 is known), d.
    EXPECT_EQ(f.counters->forwards.load(), 5);
}

TEST(EncoderBatcher, CachedAndDuplicateItemsAreNotRecomputed) {
    Fixture f;
    auto first = f.batcher.run({request("a", {1, 2, 1}), request("b", {2})});
    ASSERT_TRUE(first[0].has_value() && first[1].has_value());
    EXPECT_EQ(f.counters->items_computed.load(), 2);
    auto second = f.batcher.run({request("c", {2, 1})});
    ASSERT_TRUE(second[0].has_value());
    EXPECT_EQ(f.counters->forwards.load(), 1);
    EXPECT_EQ(f.counters->cache_hits.load(), 2);
    EXPECT_EQ(second[0]->data.find("items")->as_list()[1],
              first[0]->data.find("items")->as_list()[0]);
    EXPECT_GT(f.counters->cache_bytes.load(), 0);
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni
