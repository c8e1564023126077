// profiler_start / profiler_stop reach every stage process; each stage writes a Chrome trace.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "pipeline_harness.h"

namespace omnirt::testing {
namespace {

class Profiling : public ::testing::TestWithParam<Layout> {};

TEST_P(Profiling, EveryStageWritesATraceWithItsSpans) {
    char dir_template[] = "/tmp/omnirt-profile-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    std::string dir = dir_template;
    auto started = start_pipeline(R"(
name: profiled
model_path: none
stages:
  - {name: produce, process: a, factory: test.tensor_producer, factory_args: {bytes: 8192},
     next: pass}
  - {name: pass, process: b, factory: test.identity, next: last}
  - {name: last, process: b, factory: test.identity, terminal: true}
)",
                                  GetParam());
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = *started;
    ASSERT_TRUE(pipeline->coordinator().start_profile(dir + "/trace-{stage}.json").has_value());
    // A request submitted after start_profile may still overtake the start message at a stage
    // in another process, so several are sent and at least one must be traced everywhere.
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(pipeline->submit("traced-" + std::to_string(i), OmniRequest{}).has_value());
    }
    ASSERT_TRUE(pipeline->coordinator().stop_profile().has_value());
    for (const std::string stage : {"produce", "pass", "last"}) {
        std::string path = dir + "/trace-" + stage + ".json";
        ASSERT_TRUE(eventually([&] {
            std::ifstream in(path);
            if (!in) return false;
            return nlohmann::json::accept(in);  // written completely
        })) << path;
        std::ifstream in(path);
        auto trace = nlohmann::json::parse(in);
        ASSERT_TRUE(trace.contains("traceEvents")) << path;
        std::set<std::string> names;
        for (const auto& event : trace["traceEvents"]) {
            names.insert(event.value("name", ""));
            EXPECT_EQ(event.value("ph", ""), "X");
            EXPECT_TRUE(event.contains("ts") && event.contains("dur"));
        }
        EXPECT_TRUE(names.count("compute")) << path << ": " << trace.dump();
        if (stage == "pass") {
            // Received from another process through the relay.
            EXPECT_TRUE(names.count("relay_get") || GetParam().colocated) << trace.dump();
        }
    }
    pipeline->stop();
    std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Profiling,
    ::testing::Values(Layout{runner::Placement::in_process, false, "InProcess"},
                      Layout{runner::Placement::processes, false, "ChildProcesses"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace omnirt::testing
