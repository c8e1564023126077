#include "testing/test_stages.h"

#include <gtest/gtest.h>

#include <thread>

#include "pipeline/stage_factory.h"

namespace omnirt::pipeline {
namespace {

using testing::make_pattern_tensor;
using testing::register_test_stages;

using namespace std::chrono_literals;
constexpr auto kHangGuard = 30s;

// Drives one factory-built scheduler directly through its inbox and outbox.
class TestStagesTest : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_TRUE(register_test_stages(registry_).has_value()); }
    void TearDown() override {
        if (scheduler_) scheduler_->stop();
    }

    Result<std::unique_ptr<Scheduler>> build(const std::string& factory, StageContext context) {
        OMNI_TRY(StageFactory make, find_stage_factory(factory, registry_));
        return make(context);
    }
    void start(const std::string& factory, Map args = {}, std::vector<std::string> stream_to = {},
               std::vector<std::string> stream_sources = {}) {
        auto scheduler = build(factory, StageContext{.stage_name = "stage_a",
                                                     .args = std::move(args),
                                                     .stream_to = std::move(stream_to),
                                                     .stream_sources = std::move(stream_sources)});
        ASSERT_TRUE(scheduler.has_value()) << scheduler.error().to_string();
        scheduler_ = std::move(*scheduler);
        ASSERT_TRUE(scheduler_->start().has_value());
    }
    void push(const std::string& id, Value data, Map params = {}) {
        auto payload = std::make_shared<const StagePayload>(StagePayload{
            .request_id = id,
            .request = OmniRequest{.inputs = Value("in"), .params = Value(std::move(params))},
            .data = std::move(data)});
        ASSERT_TRUE(scheduler_->inbox().push(IncomingMessage{
            .request_id = id, .kind = IncomingKind::new_request, .payload = std::move(payload)}));
    }
    OutgoingMessage next() {
        auto out = scheduler_->outbox().pop_until(Clock::now() + kHangGuard);
        EXPECT_TRUE(out.has_value()) << "no output within the hang guard";
        return out ? std::move(*out) : OutgoingMessage{.kind = OutgoingKind::error};
    }
    // The next output must be a result; returns its data.
    Value next_result() {
        OutgoingMessage out = next();
        EXPECT_EQ(out.kind, OutgoingKind::result) << out.error.to_string();
        return out.result ? out.result->data : Value();
    }
    Error next_error() {
        OutgoingMessage out = next();
        EXPECT_EQ(out.kind, OutgoingKind::error);
        return out.error;
    }
    void expect_factory_error(const std::string& factory, Map args, std::string_view needle) {
        auto scheduler =
            build(factory, StageContext{.stage_name = "stage_a", .args = std::move(args)});
        ASSERT_FALSE(scheduler.has_value()) << factory << " accepted bad args";
        EXPECT_EQ(scheduler.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(scheduler.error().message.find(needle), std::string::npos)
            << scheduler.error().message;
    }

    Registry registry_;
    std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(TestStagesTest, RegistrationIsIdempotentAndKeepsExistingEntries) {
    EXPECT_TRUE(register_test_stages(registry_).has_value());
    Registry other;
    ASSERT_TRUE(
        other.add(FunctionKind::merge, "test.merge", RegistryEntry{.callable = 42}).has_value());
    ASSERT_TRUE(register_test_stages(other).has_value());
    EXPECT_FALSE(other.get<MergeFn>(FunctionKind::merge, "test.merge").has_value());  // kept

    for (const char* name :
         {"test.identity", "test.arithmetic", "test.sleep", "test.fail", "test.tensor_producer",
          "test.token_streamer", "test.stream_collector", "test.crash"}) {
        EXPECT_TRUE(find_stage_factory(name, registry_).has_value()) << name;
    }
    EXPECT_TRUE(registry_.get<MergeFn>(FunctionKind::merge, "test.merge").has_value());
    EXPECT_TRUE(registry_.get<RouteFn>(FunctionKind::route, "test.route_from_params").has_value());
    EXPECT_TRUE(
        registry_.get<WaitForFn>(FunctionKind::wait_for, "test.wait_for_from_params").has_value());
    EXPECT_TRUE(
        registry_.get<StreamDoneFn>(FunctionKind::stream_done, "test.stream_done_from_params")
            .has_value());
    EXPECT_TRUE(
        registry_.get<TerminalStagesFn>(FunctionKind::terminal_stages, "test.terminal_from_params")
            .has_value());
    EXPECT_TRUE(
        registry_.get<ProjectionFn>(FunctionKind::projection, "test.project_tag").has_value());
}

TEST_F(TestStagesTest, IdentityKeepsDataAndRequest) {
    start("test.identity");
    const Value data(Map{{"x", Value(1)}, {"t", Value(Tensor::from_vector<float>({1, 2}))}});
    push("r", data, Map{{"p", Value(true)}});
    OutgoingMessage out = next();
    ASSERT_EQ(out.kind, OutgoingKind::result);
    EXPECT_EQ(out.result->request_id, "r");
    EXPECT_EQ(out.result->data, data);
    EXPECT_EQ(out.result->request.inputs, Value("in"));
    EXPECT_EQ(*out.result->request.params.find("p"), Value(true));
}

TEST_F(TestStagesTest, CommonArgsAreChecked) {
    expect_factory_error("test.identity", Map{{"worker_threads", Value(0)}}, "worker_threads");
    expect_factory_error("test.identity", Map{{"worker_threads", Value("2")}}, "worker_threads");
    expect_factory_error("test.identity", Map{{"inline_compute", Value("yes")}}, "inline_compute");
    expect_factory_error("test.arithmetic", Map{{"inline_compute", Value(1)}}, "inline_compute");
    expect_factory_error("test.sleep", Map{{"ms", Value(5)}, {"inline_compute", Value(true)}},
                         "cannot take inline_compute");
    start("test.identity", Map{{"worker_threads", Value(3)}});
    push("r", Value(1));
    EXPECT_EQ(next_result(), Value(1));
}

TEST_F(TestStagesTest, ArithmeticScalesNumbersAndFloatTensors) {
    start("test.arithmetic", Map{{"scale", Value(2)}, {"offset", Value(1)}});
    push("int", Value(5));
    EXPECT_EQ(next_result(), Value(11));  // ints stay ints with int coefficients
    push("float", Value(0.5));
    EXPECT_EQ(next_result(), Value(2.0));
    push("map", Value(Map{{"a", Value(1)},
                          {"s", Value("text")},
                          {"f32", Value(Tensor::from_vector<float>({1, 2, 3}))},
                          {"f64", Value(Tensor::from_vector<double>({-1}))}}));
    EXPECT_EQ(next_result(), Value(Map{{"a", Value(3)},
                                       {"s", Value("text")},
                                       {"f32", Value(Tensor::from_vector<float>({3, 5, 7}))},
                                       {"f64", Value(Tensor::from_vector<double>({-1}))}}));
    push("bad kind", Value("text"));
    Error error = next_error();
    EXPECT_EQ(error.code, ErrorCode::invalid_argument);
    EXPECT_NE(error.message.find("test.arithmetic"), std::string::npos);
    push("bad dtype", Value(Map{{"t", Value(Tensor::from_vector<std::int32_t>({1}))}}));
    EXPECT_NE(next_error().message.find("float32 or float64"), std::string::npos);
}

TEST_F(TestStagesTest, ArithmeticWithAFloatScaleMakesFloats) {
    start("test.arithmetic", Map{{"scale", Value(0.5)}});
    push("r", Value(3));
    EXPECT_EQ(next_result(), Value(1.5));
    expect_factory_error("test.arithmetic", Map{{"scale", Value("two")}}, "'scale'");
    expect_factory_error("test.arithmetic", Map{{"offset", Value(List{})}}, "'offset'");
}

TEST_F(TestStagesTest, SleepArgsAreChecked) {
    expect_factory_error("test.sleep", {}, "'ms'");
    expect_factory_error("test.sleep", Map{{"ms", Value(-1)}}, "'ms'");
    expect_factory_error("test.sleep", Map{{"ms", Value(1.5)}}, "'ms'");
    start("test.sleep", Map{{"ms", Value(0)}});
    push("r", Value(7));
    EXPECT_EQ(next_result(), Value(7));
    push("bad", Value(7), Map{{"sleep_ms", Value(-5)}});
    EXPECT_NE(next_error().message.find("sleep_ms"), std::string::npos);
}

TEST_F(TestStagesTest, AbortEndsASleepAtOnce) {
    start("test.sleep", Map{{"ms", Value(600'000)}});
    push("long", Value(1));
    // Let the worker take it (running rather than queued); either way the abort must end it.
    const auto deadline = Clock::now() + kHangGuard;
    while (scheduler_->inbox().size() > 0 && Clock::now() < deadline) std::this_thread::yield();
    scheduler_->abort("long");
    push("next", Value(2), Map{{"sleep_ms", Value(0)}});
    OutgoingMessage out = next();  // not after ten minutes
    EXPECT_EQ(out.request_id, "next");
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

TEST_F(TestStagesTest, FailFailsWhenAskedTo) {
    start("test.fail");
    push("ok", Value(1), Map{{"fail_stage", Value("other")}});
    EXPECT_EQ(next_result(), Value(1));
    push("named", Value(1), Map{{"fail_stage", Value("stage_a")}});
    Error error = next_error();
    EXPECT_EQ(error.message, "test.fail: injected failure");
    scheduler_->stop();

    start("test.fail", Map{{"always", Value(true)}, {"message", Value("boom")}});
    push("r", Value(1));
    EXPECT_EQ(next_error().message, "test.fail: boom");
    expect_factory_error("test.fail", Map{{"always", Value(1)}}, "'always'");
    expect_factory_error("test.fail", Map{{"message", Value(1)}}, "'message'");
}

TEST_F(TestStagesTest, PatternTensorIsDeterministic) {
    auto bytes = make_pattern_tensor(300, DType::u8);
    ASSERT_TRUE(bytes.has_value());
    ASSERT_EQ(bytes->numel(), 300);
    EXPECT_EQ(std::to_integer<int>(bytes->data()[0]), 0);
    EXPECT_EQ(std::to_integer<int>(bytes->data()[250]), 250);
    EXPECT_EQ(std::to_integer<int>(bytes->data()[251]), 0);
    auto floats = make_pattern_tensor(16, DType::f32);
    ASSERT_TRUE(floats.has_value());
    EXPECT_EQ(floats->shape(), (Shape{4}));
    EXPECT_EQ(floats->data_as<float>()[3], 3.0f);
    auto halves = make_pattern_tensor(4, DType::bf16);
    ASSERT_TRUE(halves.has_value());
    EXPECT_EQ(std::to_integer<int>(halves->data()[1]), 10);
    EXPECT_TRUE(make_pattern_tensor(0, DType::f64).has_value());
    auto odd = make_pattern_tensor(3, DType::f32);
    ASSERT_FALSE(odd.has_value());
    EXPECT_EQ(odd.error().code, ErrorCode::invalid_argument);
}

TEST_F(TestStagesTest, TensorProducerMakesThePatternTensor) {
    start("test.tensor_producer", Map{{"bytes", Value(64)}});
    push("r", Value("x"));
    Value data = next_result();
    ASSERT_TRUE(data.is_map());
    EXPECT_EQ(*data.find("input"), Value("x"));
    EXPECT_EQ(*data.find("tensor"), Value(*make_pattern_tensor(64, DType::u8)));
    scheduler_->stop();

    start("test.tensor_producer", Map{{"bytes", Value(8)}, {"dtype", Value("float32")}});
    push("override", Value(), Map{{"payload_bytes", Value(40)}});
    EXPECT_EQ(*next_result().find("tensor"), Value(*make_pattern_tensor(40, DType::f32)));
    push("not a multiple", Value(), Map{{"payload_bytes", Value(3)}});
    EXPECT_EQ(next_error().code, ErrorCode::invalid_argument);
    push("negative", Value(), Map{{"payload_bytes", Value(-1)}});
    EXPECT_NE(next_error().message.find("payload_bytes"), std::string::npos);
    push("wrong type", Value(), Map{{"payload_bytes", Value("1k")}});
    EXPECT_NE(next_error().message.find("payload_bytes"), std::string::npos);

    scheduler_->stop();

    // reuse: one read-only tensor shared by every request.
    start("test.tensor_producer", Map{{"bytes", Value(128)}, {"reuse", Value(true)}});
    push("first", Value());
    Value first = next_result();
    push("second", Value());
    Value second = next_result();
    const Tensor& a = first.find("tensor")->as_tensor();
    const Tensor& b = second.find("tensor")->as_tensor();
    EXPECT_EQ(a.data(), b.data());
    EXPECT_TRUE(a.read_only());
    EXPECT_EQ(*first.find("tensor"), Value(*make_pattern_tensor(128, DType::u8)));
    expect_factory_error("test.tensor_producer", Map{{"reuse", Value("yes")}}, "reuse");

    expect_factory_error("test.tensor_producer", Map{{"dtype", Value("float99")}}, "stage_a");
    expect_factory_error("test.tensor_producer", Map{{"bytes", Value(-8)}}, "'bytes'");
}

TEST_F(TestStagesTest, TokenStreamerStreamsToTheClientAndItsTargets) {
    start("test.token_streamer", Map{{"tokens", Value(3)}}, {"talker", "vocoder"});
    push("r", Value("prompt"));
    for (std::int64_t i = 0; i < 3; ++i) {
        const Value expected(
            Map{{"token", Value(i)}, {"text", Value("t" + std::to_string(i) + " ")}});
        for (std::optional<std::string> target :
             {std::optional<std::string>(), std::optional<std::string>("talker"),
              std::optional<std::string>("vocoder")}) {
            OutgoingMessage out = next();
            ASSERT_EQ(out.kind, OutgoingKind::stream);
            EXPECT_EQ(out.target, target);
            EXPECT_EQ(out.chunk->chunk_id, i);
            EXPECT_EQ(out.chunk->chunk, expected);
        }
    }
    EXPECT_EQ(
        next_result(),
        Value(Map{{"text", Value("t0 t1 t2 ")}, {"tokens", Value(3)}, {"input", Value("prompt")}}));
    push("none", Value(), Map{{"num_tokens", Value(0)}});
    EXPECT_EQ(*next_result().find("tokens"), Value(0));
    push("bad", Value(), Map{{"num_tokens", Value(-2)}});
    EXPECT_NE(next_error().message.find("num_tokens"), std::string::npos);
    expect_factory_error("test.token_streamer", Map{{"tokens", Value("8")}}, "'tokens'");
}

TEST_F(TestStagesTest, StreamCollectorCollectsAndForwards) {
    start("test.stream_collector", Map{{"forward", Value(true)}}, {}, {"thinker"});
    auto push_chunk = [&](const std::string& id, Value chunk) {
        ASSERT_TRUE(scheduler_->inbox().push(IncomingMessage{
            .request_id = id,
            .kind = IncomingKind::stream_chunk,
            .chunk = std::make_shared<const StreamChunk>(StreamChunk{.chunk = std::move(chunk)}),
            .from_stage = "thinker"}));
    };
    push_chunk("r", Value(1));
    push("r", Value("payload"));
    push_chunk("r", Value(2));
    ASSERT_TRUE(scheduler_->inbox().push(IncomingMessage{
        .request_id = "r", .kind = IncomingKind::stream_done, .from_stage = "thinker"}));
    for (int i = 1; i <= 2; ++i) {
        OutgoingMessage out = next();
        ASSERT_EQ(out.kind, OutgoingKind::stream);
        EXPECT_EQ(out.target, std::nullopt);
        EXPECT_EQ(out.chunk->chunk, Value(i));
    }
    EXPECT_EQ(next_result(), Value(Map{{"chunks", Value(List{Value(1), Value(2)})},
                                       {"count", Value(2)},
                                       {"input", Value("payload")}}));
    EXPECT_EQ(scheduler_->active_requests(), 0u);
    expect_factory_error("test.stream_collector", Map{{"forward", Value("yes")}}, "'forward'");
}

TEST_F(TestStagesTest, StreamCollectorWithoutForwardingEmitsOnlyTheResult) {
    start("test.stream_collector", {}, {}, {"thinker"});
    push("r", Value());
    ASSERT_TRUE(scheduler_->inbox().push(IncomingMessage{
        .request_id = "r",
        .kind = IncomingKind::stream_chunk,
        .chunk = std::make_shared<const StreamChunk>(StreamChunk{.chunk = Value("c")}),
        .from_stage = "thinker"}));
    ASSERT_TRUE(scheduler_->inbox().push(IncomingMessage{
        .request_id = "r", .kind = IncomingKind::stream_done, .from_stage = "thinker"}));
    EXPECT_EQ(*next_result().find("count"), Value(1));
}

TEST_F(TestStagesTest, CrashIsIdentityUnlessNamed) {
    start("test.crash");
    push("r", Value(1), Map{{"crash_stage", Value("other")}});
    EXPECT_EQ(next_result(), Value(1));
}

TEST_F(TestStagesTest, CrashExitsWith77WhenNamed) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            start("test.crash");
            push("r", Value(1), Map{{"crash_stage", Value("stage_a")}});
            (void)scheduler_->outbox().pop_until(Clock::now() + kHangGuard);
            std::_Exit(0);  // not reached when the stage crashes
        },
        ::testing::ExitedWithCode(77), "");
    EXPECT_EXIT(
        {
            start("test.crash", Map{{"always", Value(true)}});
            push("r", Value(1));
            (void)scheduler_->outbox().pop_until(Clock::now() + kHangGuard);
            std::_Exit(0);
        },
        ::testing::ExitedWithCode(77), "");
}

// ---- functions ----

StagePayload payload_with_params(Map params, Value data = {}) {
    return StagePayload{.request_id = "r",
                        .request = OmniRequest{.params = Value(std::move(params))},
                        .data = std::move(data)};
}

TEST_F(TestStagesTest, MergeMapsSourcesToTheirData) {
    auto merge = registry_.get<MergeFn>(FunctionKind::merge, "test.merge");
    ASSERT_TRUE(merge.has_value());
    auto a =
        std::make_shared<const StagePayload>(payload_with_params({{"k", Value(1)}}, Value("A")));
    auto b =
        std::make_shared<const StagePayload>(payload_with_params({{"k", Value(1)}}, Value("B")));
    auto merged = (*merge)("r", {{"audio", a}, {"image", b}});
    ASSERT_TRUE(merged.has_value());
    EXPECT_EQ(merged->request_id, "r");
    EXPECT_EQ(merged->request, a->request);
    EXPECT_EQ(merged->data, Value(Map{{"audio", Value("A")}, {"image", Value("B")}}));
    EXPECT_EQ((*merge)("r", {}).error().code, ErrorCode::invalid_argument);
    EXPECT_EQ((*merge)("r", {{"audio", nullptr}}).error().code, ErrorCode::invalid_argument);
}

TEST_F(TestStagesTest, RouteAndStreamDoneReadRequiredListParams) {
    auto route = registry_.get<RouteFn>(FunctionKind::route, "test.route_from_params");
    auto stream_done =
        registry_.get<StreamDoneFn>(FunctionKind::stream_done, "test.stream_done_from_params");
    ASSERT_TRUE(route.has_value() && stream_done.has_value());
    const auto good = payload_with_params({{"route", Value(List{Value("a"), Value("b")})},
                                           {"stream_done_to", Value(List{Value("c")})}});
    EXPECT_EQ((*route)("r", good), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ((*stream_done)("r", good), (std::vector<std::string>{"c"}));
    const auto empty_list = payload_with_params({{"route", Value(List{})}});
    EXPECT_EQ((*route)("r", empty_list), std::vector<std::string>{});

    const auto missing = payload_with_params({});
    EXPECT_NE((*route)("r", missing).error().message.find("'route' is missing"), std::string::npos);
    EXPECT_NE((*stream_done)("r", missing).error().message.find("stream_done_to"),
              std::string::npos);
    const auto wrong =
        payload_with_params({{"route", Value("a")}, {"stream_done_to", Value(List{Value(1)})}});
    EXPECT_EQ((*route)("r", wrong).error().code, ErrorCode::invalid_argument);
    EXPECT_EQ((*stream_done)("r", wrong).error().code, ErrorCode::invalid_argument);
    // Params that are not a map at all.
    StagePayload no_params;
    EXPECT_FALSE((*route)("r", no_params).has_value());
}

TEST_F(TestStagesTest, WaitForAndTerminalAreOptionalListParams) {
    auto wait_for = registry_.get<WaitForFn>(FunctionKind::wait_for, "test.wait_for_from_params");
    auto terminal =
        registry_.get<TerminalStagesFn>(FunctionKind::terminal_stages, "test.terminal_from_params");
    ASSERT_TRUE(wait_for.has_value() && terminal.has_value());
    const auto with =
        payload_with_params({{"wait_for", Value(List{Value("x")})},
                             {"terminal_stages", Value(List{Value("y"), Value("z")})}});
    auto sources = (*wait_for)("r", "up", with);
    ASSERT_TRUE(sources.has_value());
    EXPECT_EQ(*sources, (std::vector<std::string>{"x"}));
    auto terminals = (*terminal)(with.request);
    ASSERT_TRUE(terminals.has_value());
    EXPECT_EQ(*terminals, (std::vector<std::string>{"y", "z"}));

    const auto without = payload_with_params({});
    EXPECT_EQ((*wait_for)("r", "up", without), std::nullopt);
    EXPECT_EQ((*terminal)(without.request), std::nullopt);
    const auto wrong =
        payload_with_params({{"wait_for", Value(3)}, {"terminal_stages", Value(Map{})}});
    EXPECT_EQ((*wait_for)("r", "up", wrong).error().code, ErrorCode::invalid_argument);
    EXPECT_EQ((*terminal)(wrong.request).error().code, ErrorCode::invalid_argument);
}

TEST_F(TestStagesTest, ProjectTagWrapsTheData) {
    auto project = registry_.get<ProjectionFn>(FunctionKind::projection, "test.project_tag");
    ASSERT_TRUE(project.has_value());
    const auto output = payload_with_params({{"k", Value(1)}}, Value(5));
    auto projected = (*project)("talker", output);
    ASSERT_TRUE(projected.has_value());
    EXPECT_EQ(projected->request_id, output.request_id);
    EXPECT_EQ(projected->request, output.request);
    EXPECT_EQ(projected->data, Value(Map{{"projected_for", Value("talker")}, {"data", Value(5)}}));
    EXPECT_EQ(output.data, Value(5));  // the input is untouched
}

}  // namespace
}  // namespace omnirt::pipeline
