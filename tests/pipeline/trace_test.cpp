#include "pipeline/trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace omnirt::pipeline {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class TracerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = (fs::path(::testing::TempDir()) / "omnirt-trace-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        dir_ = pattern;
    }
    void TearDown() override { fs::remove_all(dir_); }

    static nlohmann::json read_json(const std::string& path) {
        std::ifstream in(path);
        std::stringstream text;
        text << in.rdbuf();
        return nlohmann::json::parse(text.str());
    }
    static TraceSpan span(std::string name, std::string request_id, Clock::time_point start,
                          Clock::duration length) {
        return TraceSpan{.name = std::move(name),
                         .category = "scheduler",
                         .request_id = std::move(request_id),
                         .start = start,
                         .end = start + length};
    }

    fs::path dir_;
};

TEST_F(TracerTest, ResolvePathSubstitutesStageAndPid) {
    Tracer tracer("thinker");
    const std::string pid = std::to_string(::getpid());
    EXPECT_EQ(tracer.resolve_path("/tmp/t-{stage}-{pid}.json"), "/tmp/t-thinker-" + pid + ".json");
    EXPECT_EQ(tracer.resolve_path("/tmp/{stage}/{stage}.json"), "/tmp/thinker/thinker.json");
    // Without {stage}: "-<stage>" before the file's extension.
    EXPECT_EQ(tracer.resolve_path("/tmp/trace.json"), "/tmp/trace-thinker.json");
    EXPECT_EQ(tracer.resolve_path("/tmp/trace-{pid}.json"), "/tmp/trace-" + pid + "-thinker.json");
    EXPECT_EQ(tracer.resolve_path("/tmp/trace"), "/tmp/trace-thinker");
    // A dot in a directory name is no extension.
    EXPECT_EQ(tracer.resolve_path("/tmp/v1.2/trace"), "/tmp/v1.2/trace-thinker");
    EXPECT_EQ(tracer.resolve_path("trace.json"), "trace-thinker.json");
}

TEST_F(TracerTest, StopWithoutStartFails) {
    Tracer tracer("decode");
    auto stopped = tracer.stop();
    ASSERT_FALSE(stopped.has_value());
    EXPECT_EQ(stopped.error().code, ErrorCode::failed_precondition);
    EXPECT_NE(stopped.error().message.find("decode"), std::string::npos);
}

TEST_F(TracerTest, RecordsOnlyWhileEnabledAndWritesChromeTraceJson) {
    Tracer tracer("encoder");
    const auto t0 = Clock::now();
    tracer.record(span("compute", "before", t0, 1ms));  // not recording: dropped
    EXPECT_FALSE(tracer.enabled());

    tracer.start((dir_ / "trace-{stage}.json").string());
    EXPECT_TRUE(tracer.enabled());
    const auto t1 = Clock::now();
    tracer.record(span("queue_wait", "req-1", t1, 2ms));
    tracer.record(span("compute", "req-1", t1 + 2ms, 3ms));
    { ScopedSpan scoped(&tracer, "relay_put", "relay", "req-2"); }
    ScopedSpan null_tracer(nullptr, "compute", "scheduler", "ignored");  // must not crash

    auto path = tracer.stop();
    ASSERT_TRUE(path.has_value()) << path.error().to_string();
    EXPECT_EQ(*path, (dir_ / "trace-encoder.json").string());
    EXPECT_FALSE(tracer.enabled());
    tracer.record(span("compute", "after", Clock::now(), 1ms));  // stopped: dropped

    nlohmann::json trace = read_json(*path);
    ASSERT_TRUE(trace.contains("traceEvents"));
    const auto& events = trace["traceEvents"];
    ASSERT_EQ(events.size(), 3u);
    std::vector<std::string> names;
    for (const auto& event : events) {
        names.push_back(event["name"]);
        EXPECT_EQ(event["ph"], "X");
        EXPECT_TRUE(event["ts"].is_number());
        EXPECT_TRUE(event["dur"].is_number());
        EXPECT_GE(event["ts"].get<double>(), 0.0);
        EXPECT_GE(event["dur"].get<double>(), 0.0);
        EXPECT_EQ(event["pid"], ::getpid());
        EXPECT_TRUE(event["tid"].is_number_integer());
        EXPECT_EQ(event["args"]["stage"], "encoder");
        EXPECT_TRUE(event.contains("cat"));
    }
    EXPECT_EQ(names, (std::vector<std::string>{"queue_wait", "compute", "relay_put"}));
    EXPECT_EQ(events[0]["args"]["request_id"], "req-1");
    EXPECT_EQ(events[2]["args"]["request_id"], "req-2");
    EXPECT_EQ(events[2]["cat"], "relay");
    EXPECT_NEAR(events[0]["dur"].get<double>(), 2000.0, 1.0);
    EXPECT_NEAR(events[1]["ts"].get<double>() - events[0]["ts"].get<double>(), 2000.0, 1.0);

    // A second stop has nothing to stop.
    EXPECT_FALSE(tracer.stop().has_value());
}

TEST_F(TracerTest, SpanStartedBeforeTheRecordingIsCutAtItsStart) {
    Tracer tracer("s");
    const auto early = Clock::now() - 1s;
    tracer.start((dir_ / "cut.json").string());
    tracer.record(span("queue_wait", "r", early, 2s));
    auto path = tracer.stop();
    ASSERT_TRUE(path.has_value());
    const auto events = read_json(*path)["traceEvents"];
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0]["ts"].get<double>(), 0.0);
    EXPECT_LE(events[0]["dur"].get<double>(), 1e6 + 1.0);
}

TEST_F(TracerTest, RestartClearsSpansAndUsesTheNewTemplate) {
    Tracer tracer("talker");
    tracer.start((dir_ / "first.json").string());
    tracer.record(span("compute", "old", Clock::now(), 1ms));
    tracer.start((dir_ / "second-{stage}.json").string());
    tracer.record(span("compute", "new", Clock::now(), 1ms));
    auto path = tracer.stop();
    ASSERT_TRUE(path.has_value());
    EXPECT_EQ(*path, (dir_ / "second-talker.json").string());
    EXPECT_FALSE(fs::exists(dir_ / "first-talker.json"));
    const auto events = read_json(*path)["traceEvents"];
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0]["args"]["request_id"], "new");
}

TEST_F(TracerTest, EmptyRecordingWritesAnEmptyEventList) {
    Tracer tracer("idle");
    tracer.start((dir_ / "nested" / "dir" / "{stage}.json").string());
    auto path = tracer.stop();
    ASSERT_TRUE(path.has_value()) << path.error().to_string();
    const auto trace = read_json(*path);
    EXPECT_TRUE(trace["traceEvents"].is_array());
    EXPECT_TRUE(trace["traceEvents"].empty());
}

TEST_F(TracerTest, UnwritablePathFailsAndStopsRecording) {
    Tracer tracer("s");
    // A regular file where a directory is needed.
    const fs::path blocker = dir_ / "blocker";
    std::ofstream(blocker) << "x";
    tracer.start((blocker / "trace.json").string());
    auto stopped = tracer.stop();
    ASSERT_FALSE(stopped.has_value());
    EXPECT_NE(stopped.error().message.find("cannot write trace"), std::string::npos);
    EXPECT_FALSE(tracer.enabled());
}

TEST_F(TracerTest, ConcurrentRecordersAreAllKept) {
    Tracer tracer("busy");
    tracer.start((dir_ / "busy.json").string());
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 250; ++i) {
                ScopedSpan scoped(&tracer, "compute", "scheduler", "r" + std::to_string(t));
            }
        });
    }
    for (auto& thread : threads) thread.join();
    auto path = tracer.stop();
    ASSERT_TRUE(path.has_value());
    EXPECT_EQ(read_json(*path)["traceEvents"].size(), 1000u);
}

}  // namespace
}  // namespace omnirt::pipeline
