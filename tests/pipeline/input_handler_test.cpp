// Input handlers in isolation, with explicit times (no clocks, no threads).
#include "pipeline/input_handler.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "pipeline/trace.h"

namespace omnirt::pipeline {
namespace {

using Clock = InputHandler::Clock;
using namespace std::chrono_literals;

std::shared_ptr<const StagePayload> payload(const std::string& id, Value data) {
    return std::make_shared<const StagePayload>(StagePayload{.request_id = id, .data = data});
}

MergeFn merge_sources() {
    return [](const std::string& request_id,
              const std::map<std::string, std::shared_ptr<const StagePayload>>& inputs)
               -> Result<StagePayload> {
        Map data;
        for (const auto& [source, input] : inputs) data[source] = input->data;
        return StagePayload{.request_id = request_id, .data = std::move(data)};
    };
}

// Reads data["active"] (a list) when present.
WaitForFn active_from_data() {
    return [](const std::string&, const std::string&,
              const StagePayload& p) -> Result<std::optional<std::vector<std::string>>> {
        const Value* active = p.data.find("active");
        if (active == nullptr) return std::optional<std::vector<std::string>>();
        std::vector<std::string> names;
        for (const auto& v : active->as_list()) names.push_back(v.as_string());
        return std::optional<std::vector<std::string>>(names);
    };
}

std::unique_ptr<AggregatedInput> make(AggregatedInputOptions options) {
    if (!options.merge_fn) options.merge_fn = merge_sources();
    auto handler = AggregatedInput::create(std::move(options));
    EXPECT_TRUE(handler.has_value());
    return handler ? std::move(*handler) : nullptr;
}

TEST(DirectInput, PassesEveryPayloadThrough) {
    DirectInput input;
    auto p = payload("r", 1);
    auto out = input.receive("r", "", p, Clock::now());
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->get(), p.get());
    EXPECT_EQ(input.pending(), 0u);
    EXPECT_FALSE(input.next_deadline().has_value());
    EXPECT_FALSE(input.aggregates());
}

TEST(AggregatedInput, CreateNeedsSourcesAndMerge) {
    EXPECT_FALSE(AggregatedInput::create({.merge_fn = merge_sources()}).has_value());
    EXPECT_FALSE(AggregatedInput::create({.wait_for = {"a"}}).has_value());
}

TEST(AggregatedInput, MergesOnceEverySourceArrived) {
    auto input = make({.wait_for = {"a", "b"}});
    Clock::time_point t0{};
    auto first = input->receive("r", "b", payload("r", 2), t0);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(*first, nullptr);
    EXPECT_EQ(input->pending(), 1u);
    EXPECT_EQ(input->next_deadline(), t0 + 60s);
    auto merged = input->receive("r", "a", payload("r", 1), t0 + 1s);
    ASSERT_TRUE(merged.has_value());
    ASSERT_NE(*merged, nullptr);
    EXPECT_EQ((*merged)->request_id, "r");
    EXPECT_EQ((*merged)->data, Value(Map{{"a", 1}, {"b", 2}}));
    EXPECT_EQ(input->pending(), 0u);
    EXPECT_FALSE(input->next_deadline().has_value());
    EXPECT_TRUE(input->aggregates());
}

TEST(AggregatedInput, RequestsAreIndependent) {
    auto input = make({.wait_for = {"a", "b"}});
    Clock::time_point t0{};
    ASSERT_TRUE(input->receive("r1", "a", payload("r1", 1), t0).has_value());
    ASSERT_TRUE(input->receive("r2", "b", payload("r2", 2), t0).has_value());
    EXPECT_EQ(input->pending(), 2u);
    auto r2 = input->receive("r2", "a", payload("r2", 3), t0);
    ASSERT_TRUE(r2.has_value() && *r2);
    EXPECT_EQ((*r2)->data, Value(Map{{"a", 3}, {"b", 2}}));
    EXPECT_EQ(input->pending(), 1u);
}

TEST(AggregatedInput, UnknownAndDuplicateSourcesFailTheRequest) {
    auto input = make({.wait_for = {"a", "b"}});
    Clock::time_point t0{};
    auto unknown = input->receive("r", "zzz", payload("r", 1), t0);
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().message,
              "fan-in got a payload from stage 'zzz', which is not among its wait_for sources "
              "(a, b)");
    auto coordinator = input->receive("r", "", payload("r", 1), t0);
    ASSERT_FALSE(coordinator.has_value());
    EXPECT_NE(coordinator.error().message.find("the coordinator"), std::string::npos);
    ASSERT_TRUE(input->receive("d", "a", payload("d", 1), t0).has_value());
    auto twice = input->receive("d", "a", payload("d", 1), t0);
    ASSERT_FALSE(twice.has_value());
    EXPECT_NE(twice.error().message.find("second payload from stage 'a'"), std::string::npos);
    EXPECT_EQ(input->pending(), 0u);  // the failed request's state is gone
}

TEST(AggregatedInput, WaitForFnNulloptKeepsWaitingAndASubsetMergesEarly) {
    auto input = make({.wait_for = {"a", "b", "c"}, .wait_for_fn = active_from_data()});
    Clock::time_point t0{};
    auto first = input->receive("r", "a", payload("r", Map{{"x", 1}}), t0);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(*first, nullptr);
    auto second = input->receive("r", "b", payload("r", Map{{"active", List{"a", "b"}}}), t0);
    ASSERT_TRUE(second.has_value());
    ASSERT_NE(*second, nullptr);
    EXPECT_EQ((*second)->data.as_map().size(), 2u);  // only the active sources
    EXPECT_EQ(input->pending(), 0u);
}

TEST(AggregatedInput, InactiveSourcesAreIgnoredOnceTheSubsetIsKnown) {
    auto input = make({.wait_for = {"a", "b", "c"}, .wait_for_fn = active_from_data()});
    Clock::time_point t0{};
    ASSERT_TRUE(input->receive("r", "a", payload("r", Map{{"active", List{"a", "c"}}}), t0));
    auto inactive = input->receive("r", "b", payload("r", 2), t0);
    ASSERT_TRUE(inactive.has_value());
    EXPECT_EQ(*inactive, nullptr);
    auto merged = input->receive("r", "c", payload("r", 3), t0);
    ASSERT_TRUE(merged.has_value() && *merged);
    EXPECT_EQ((*merged)->data.find("b"), nullptr);
}

TEST(AggregatedInput, NulloptAfterEverySourceMeansAllOfWaitFor) {
    auto input = make({.wait_for = {"a", "b"}, .wait_for_fn = active_from_data()});
    Clock::time_point t0{};
    ASSERT_TRUE(input->receive("r", "a", payload("r", 1), t0));
    auto merged = input->receive("r", "b", payload("r", 2), t0);
    ASSERT_TRUE(merged.has_value() && *merged);
    EXPECT_EQ((*merged)->data, Value(Map{{"a", 1}, {"b", 2}}));
}

TEST(AggregatedInput, BadSubsetsAndFunctionFailuresFailTheRequest) {
    auto input = make({.wait_for = {"a", "b"}, .wait_for_fn = active_from_data()});
    Clock::time_point t0{};
    auto outside = input->receive("r1", "a", payload("r1", Map{{"active", List{"zzz"}}}), t0);
    ASSERT_FALSE(outside.has_value());
    EXPECT_NE(outside.error().message.find("'zzz', which is not among wait_for (a, b)"),
              std::string::npos);
    auto empty = input->receive("r2", "a", payload("r2", Map{{"active", List{}}}), t0);
    ASSERT_FALSE(empty.has_value());
    EXPECT_EQ(input->pending(), 0u);

    auto erring = make(
        {.wait_for = {"a"},
         .wait_for_fn = [](const std::string&, const std::string&,
                           const StagePayload&) -> Result<std::optional<std::vector<std::string>>> {
             return fail(ErrorCode::invalid_argument, "no idea");
         }});
    auto error = erring->receive("r", "a", payload("r", 1), t0);
    ASSERT_FALSE(error.has_value());
    EXPECT_EQ(error.error().message, "wait_for_fn: no idea");

    auto throwing_merge =
        make({.wait_for = {"a"},
              .merge_fn = [](const std::string&,
                             const std::map<std::string, std::shared_ptr<const StagePayload>>&)
                  -> Result<StagePayload> { throw std::runtime_error("boom"); }});
    auto thrown = throwing_merge->receive("r", "a", payload("r", 1), t0);
    ASSERT_FALSE(thrown.has_value());
    EXPECT_EQ(thrown.error().code, ErrorCode::internal);
    EXPECT_NE(thrown.error().message.find("merge_fn threw: boom"), std::string::npos);
    EXPECT_EQ(throwing_merge->pending(), 0u);

    auto wrong_id =
        make({.wait_for = {"a"},
              .merge_fn = [](const std::string&,
                             const std::map<std::string, std::shared_ptr<const StagePayload>>&)
                  -> Result<StagePayload> { return StagePayload{.request_id = "other"}; }});
    EXPECT_FALSE(wrong_id->receive("r", "a", payload("r", 1), t0).has_value());
}

TEST(AggregatedInput, ExpireFailsRequestsPastTheirDeadlineNamingMissingSources) {
    auto input = make({.wait_for = {"a", "b", "c"}, .fan_in_timeout = 1500ms});
    Clock::time_point t0{};
    ASSERT_TRUE(input->receive("early", "a", payload("early", 1), t0));
    ASSERT_TRUE(input->receive("late", "b", payload("late", 1), t0 + 1s));
    EXPECT_EQ(input->next_deadline(), t0 + 1500ms);
    EXPECT_TRUE(input->expire(t0 + 1499ms).empty());
    auto expired = input->expire(t0 + 1500ms);
    ASSERT_EQ(expired.size(), 1u);
    EXPECT_EQ(expired[0].request_id, "early");
    EXPECT_EQ(expired[0].error.code, ErrorCode::deadline_exceeded);
    EXPECT_EQ(expired[0].error.message, "fan-in timed out after 1.5 s waiting for b, c");
    EXPECT_EQ(input->pending(), 1u);
    EXPECT_EQ(input->next_deadline(), t0 + 2500ms);
    EXPECT_EQ(input->expire(t0 + 10s).size(), 1u);
    EXPECT_EQ(input->pending(), 0u);
    EXPECT_FALSE(input->next_deadline().has_value());
}

TEST(AggregatedInput, ExpireExplainsAnUndecidedWaitForFn) {
    auto input =
        make({.wait_for = {"a", "b"}, .wait_for_fn = active_from_data(), .fan_in_timeout = 1s});
    Clock::time_point t0{};
    ASSERT_TRUE(input->receive("r", "a", payload("r", 1), t0));
    auto expired = input->expire(t0 + 1s);
    ASSERT_EQ(expired.size(), 1u);
    EXPECT_EQ(expired[0].error.message,
              "fan-in timed out after 1 s waiting for b (wait_for_fn did not choose sources)");
}

TEST(AggregatedInput, DropForgetsTheRequestAndItsDeadline) {
    auto input = make({.wait_for = {"a", "b"}});
    Clock::time_point t0{};
    ASSERT_TRUE(input->receive("r", "a", payload("r", 1), t0));
    input->drop("r");
    input->drop("unknown");
    EXPECT_EQ(input->pending(), 0u);
    EXPECT_FALSE(input->next_deadline().has_value());
    // The id starts fresh afterwards.
    auto again = input->receive("r", "a", payload("r", 1), t0);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(*again, nullptr);
}

TEST(AggregatedInput, RecordsFanInWaitSpans) {
    Tracer tracer("d");
    tracer.start(::testing::TempDir() + "/h2-fan-in-{pid}.json");
    auto input = make({.wait_for = {"a", "b"}, .tracer = &tracer});
    ASSERT_TRUE(input->receive("r", "a", payload("r", 1), Clock::now()));
    auto merged = input->receive("r", "b", payload("r", 2), Clock::now());
    ASSERT_TRUE(merged.has_value() && *merged);
    auto path = tracer.stop();
    ASSERT_TRUE(path.has_value());
    std::ifstream file(*path);
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("fan_in_wait"), std::string::npos);
    std::remove(path->c_str());
}

}  // namespace
}  // namespace omnirt::pipeline
