// The loader end to end: unknown keys, wrong types and missing fields at every level with
// their lines, JSON input, several errors at once, files, plugins and defaults.
#include <gtest/gtest.h>

#include "config/load.h"
#include "pipeline_text.h"

namespace omnirt::config {
namespace {

using testing::has_diagnostic;
using testing::load_report;
using testing::PipelineText;

TEST(Load, UnknownPipelineKeyListsTheValidKeys) {
    auto p = PipelineText::linear().top("relay_backnd", "shm");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(
        report, p.top_line("relay_backnd"), "", "relay_backnd",
        "unknown key; did you mean 'relay_backend'? (valid keys: "
        "model_path, stages, name, entry_stage, relay_backend, "
        "fused_stages, runtime_overrides, env_defaults, endpoints, "
        "terminal_stages_fn, config_cls, plugins, gpu_memory_limit, restart, nodes)"));
}

TEST(Load, UnknownStageKeyNamesTheStageAndLine) {
    auto p = PipelineText::linear().set("b", "procss", "x").set("b", "colour", "red");
    auto report = load_report(p.text());
    EXPECT_TRUE(
        has_diagnostic(report, p.line("b", "procss"), "b", "procss",
                       "unknown key; did you mean 'process'? (valid keys: name, factory, "));
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "colour"), "b", "colour",
                               "unknown key (valid keys: name, factory, factory_args, next, "
                               "terminal, route_fn, gpu, tp_size, process, wait_for, wait_for_fn, "
                               "merge_fn, stream_to, stream_done_to_fn, project_payload, relay, "
                               "gpu_memory_fraction, fan_in_timeout_s, replicas, node)"));
}

TEST(Load, UnknownRelayKeyIsLocated) {
    std::string text = PipelineText::linear().text() + "    relay:\n      credit: 4\n";
    auto report = load_report(text);
    EXPECT_TRUE(has_diagnostic(report, 16, "c", "relay.credit",
                               "unknown key; did you mean 'credits'? (valid keys: slot_size_mb, "
                               "credits, rank, world_size, device)"));
}

TEST(Load, UnknownEndpointsKeyIsLocated) {
    std::string text = "endpoints:\n  scheme: tcp\n  port: 1\n" + PipelineText::linear().text();
    auto report = load_report(text);
    EXPECT_TRUE(has_diagnostic(
        report, 3, "", "endpoints.port",
        "unknown key; did you mean 'base_port'? (valid keys: scheme, base_path, host, "
        "base_port)"));
}

TEST(Load, MissingRequiredFields) {
    auto p = PipelineText::linear().erase_top("model_path").erase("b", "factory");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, 1, "", "model_path", "missing required field 'model_path'"));
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "name"), "b", "factory",
                               "missing required field 'factory'"));
    EXPECT_EQ(report.diagnostics.size(), 2u) << testing::dump(report);
    report = load_report("model_path: m\n");
    EXPECT_TRUE(has_diagnostic(report, 1, "", "stages", "missing required field 'stages'"));
    report = load_report("model_path: m\nstages:\n  - factory: f\n    terminal: true\n");
    EXPECT_TRUE(has_diagnostic(report, 3, "stages[0]", "name", "missing required field 'name'"));
}

struct WrongType {
    const char* stage;  // empty: pipeline level
    const char* key;
    const char* value;
    const char* field;
    const char* message;
};

void PrintTo(const WrongType& c, std::ostream* os) { *os << c.field << "=" << c.value; }

class LoadWrongType : public ::testing::TestWithParam<WrongType> {};

TEST_P(LoadWrongType, NamesTheFieldAndTheExpectedType) {
    const WrongType& c = GetParam();
    auto p = PipelineText::linear();
    std::string stage = c.stage;
    if (stage.empty()) {
        p.top(c.key, c.value);
    } else {
        p.set(stage, c.key, c.value);
    }
    auto report = load_report(p.text());
    int line = stage.empty() ? p.top_line(c.key) : p.line(stage, c.key);
    // A stage whose name cannot be read is named by its index.
    std::string label = std::string(c.key) == "name" && !stage.empty() ? "stages[1]" : stage;
    EXPECT_TRUE(has_diagnostic(report, line, label, c.field, c.message));
}

INSTANTIATE_TEST_SUITE_P(
    Everywhere, LoadWrongType,
    ::testing::Values(
        WrongType{"", "model_path", "5", "model_path",
                  "expected a string, got integer 5 (quote it to use it as a string)"},
        WrongType{"", "model_path", "~", "model_path", "expected a string, got null"},
        WrongType{"", "name", "[x]", "name", "expected a string, got a list"},
        WrongType{"", "entry_stage", "{a: 1}", "entry_stage", "expected a string, got a map"},
        WrongType{"", "relay_backend", "true", "relay_backend",
                  "expected a string, got boolean true"},
        WrongType{"", "fused_stages", "a", "fused_stages",
                  "expected a list of stage-name lists, got string \"a\""},
        WrongType{"", "fused_stages", "[a]", "fused_stages[0]",
                  "expected a list of stage names, got string \"a\""},
        WrongType{"", "fused_stages", "[[a, 1]]", "fused_stages[0][1]",
                  "expected a stage name (a string), got integer 1"},
        WrongType{"", "runtime_overrides", "[a]", "runtime_overrides",
                  "expected a map of stage name to argument map, got a list"},
        WrongType{"", "runtime_overrides", "{a: 1}", "runtime_overrides.a",
                  "expected a map of factory arguments, got integer 1"},
        WrongType{"", "env_defaults", "[A]", "env_defaults",
                  "expected a map of strings, got a list"},
        WrongType{"", "endpoints", "tcp", "endpoints", "expected a map, got string \"tcp\""},
        WrongType{"", "endpoints", "{base_port: x}", "endpoints.base_port",
                  "expected an integer, got string \"x\""},
        WrongType{"", "endpoints", "{host: 1}", "endpoints.host",
                  "expected a string, got integer 1"},
        WrongType{"", "terminal_stages_fn", "[f]", "terminal_stages_fn",
                  "expected a string, got a list"},
        WrongType{"", "config_cls", "1.5", "config_cls", "expected a string, got float 1.5"},
        WrongType{"", "plugins", "lib.so", "plugins", "expected a list of strings, got string"},
        WrongType{"", "plugins", "[1]", "plugins[0]", "expected a string, got integer 1"},
        WrongType{"", "gpu_memory_limit", "half", "gpu_memory_limit",
                  "expected a number, got string \"half\""},
        WrongType{"", "restart", "on", "restart", "expected a map, got string \"on\""},
        WrongType{"", "restart", "{max_restarts: x}", "restart.max_restarts",
                  "expected an integer, got string \"x\""},
        WrongType{"", "restart", "{window_s: soon}", "restart.window_s",
                  "expected a number, got string \"soon\""},
        WrongType{"b", "name", "7", "name", "expected a string, got integer 7"},
        WrongType{"b", "factory", "[f]", "factory", "expected a string, got a list"},
        WrongType{"b", "factory_args", "[1]", "factory_args", "expected a map, got a list"},
        WrongType{"b", "next", "5", "next",
                  "expected a string or a list of strings, got integer 5"},
        WrongType{"b", "next", "[c, 5]", "next[1]", "expected a string, got integer 5"},
        WrongType{"c", "terminal", "yes", "terminal",
                  "expected a boolean (true or false), got string \"yes\""},
        WrongType{"c", "terminal", "~", "terminal", "expected a boolean (true or false), got null"},
        WrongType{"b", "route_fn", "{}", "route_fn", "expected a string, got a map"},
        WrongType{"b", "gpu", "'0'", "gpu",
                  "expected an integer or a list of integers, got string"},
        WrongType{"b", "gpu", "0.5", "gpu", "expected an integer or a list of integers, got float"},
        WrongType{"b", "gpu", "[0, x]", "gpu[1]", "expected an integer, got string \"x\""},
        WrongType{"b", "gpu", "99999999999", "gpu", "integer 99999999999 is out of range"},
        WrongType{"b", "tp_size", "1.5", "tp_size", "expected an integer, got float 1.5"},
        WrongType{"b", "process", "5", "process",
                  "expected a string, got integer 5 (quote it to use it as a string)"},
        WrongType{"b", "wait_for", "a", "wait_for", "expected a list of strings, got string \"a\""},
        WrongType{"b", "wait_for_fn", "[x]", "wait_for_fn", "expected a string, got a list"},
        WrongType{"b", "merge_fn", "1", "merge_fn", "expected a string, got integer 1"},
        WrongType{"b", "stream_to", "{c: 1}", "stream_to", "expected a list of strings, got a map"},
        WrongType{"b", "stream_done_to_fn", "false", "stream_done_to_fn",
                  "expected a string, got boolean false"},
        WrongType{"b", "project_payload", "[c]", "project_payload",
                  "expected a map of strings, got a list"},
        WrongType{"b", "project_payload", "{c: 1}", "project_payload.c",
                  "expected a string, got integer 1"},
        WrongType{"b", "relay", "4", "relay", "expected a map, got integer 4"},
        WrongType{"b", "relay", "{credits: many}", "relay.credits",
                  "expected an integer, got string \"many\""},
        WrongType{"b", "relay", "{slot_size_mb: big}", "relay.slot_size_mb",
                  "expected a number, got string \"big\""},
        WrongType{"b", "relay", "{device: 0}", "relay.device", "expected a string, got integer 0"},
        WrongType{"b", "gpu_memory_fraction", "most", "gpu_memory_fraction",
                  "expected a number, got string \"most\""},
        WrongType{"b", "fan_in_timeout_s", "[]", "fan_in_timeout_s",
                  "expected a number, got a list"}),
    [](const ::testing::TestParamInfo<WrongType>& info) {
        std::string name = std::string(*info.param.stage ? info.param.stage : "pipeline") + "_" +
                           info.param.key + "_" + std::to_string(info.index);
        return name;
    });

TEST(Load, WrongTypeIsNotAlsoReportedAsMissing) {
    auto p = PipelineText::linear().set("b", "next", "5");
    auto report = load_report(p.text());
    EXPECT_EQ(report.diagnostics.size(), 1u) << testing::dump(report);
}

TEST(Load, StructuralErrors) {
    EXPECT_TRUE(has_diagnostic(load_report(""), 1, "", "", "the config is empty"));
    EXPECT_TRUE(has_diagnostic(load_report("[1, 2]\n"), 1, "", "",
                               "expected a pipeline config (a map with 'model_path' and "
                               "'stages'), got a list"));
    EXPECT_TRUE(has_diagnostic(load_report("model_path: m\nstages: []\n"), 2, "", "stages",
                               "'stages' is empty"));
    EXPECT_TRUE(has_diagnostic(load_report("model_path: m\nstages: {a: 1}\n"), 2, "", "stages",
                               "expected a list of stages, got a map"));
    EXPECT_TRUE(has_diagnostic(load_report("model_path: m\nstages:\n  - just a string\n"), 3,
                               "stages[0]", "", "expected a stage (a map), got string"));
    EXPECT_TRUE(has_diagnostic(load_report("a: [1\n"), 0, "", "", "YAML syntax error"));
    EXPECT_TRUE(has_diagnostic(load_report("a: 1\na: 2\n"), 2, "", "", "duplicate key 'a'"));
}

TEST(Load, JsonConfigReportsLines) {
    const char* json = R"({
  "model_path": "m",
  "stages": [
    {"name": "a", "process": "p", "factory": "f", "next": "b"},
    {"name": "b", "process": "p", "factory": "f", "terminal": "yes",
     "gpu": [0, 1]}
  ]
})";
    auto report = load_pipeline_text_report(json, "pipeline.json",
                                            {.load_plugins = false, .check_registry = false});
    ASSERT_EQ(report.diagnostics.size(), 3u) << testing::dump(report);
    EXPECT_EQ(report.diagnostics[0].to_string(),
              "pipeline.json:5:5: stage 'b': field 'next': set exactly one of 'next' "
              "(downstream stages) or 'terminal: true'; the stage has neither");
    EXPECT_EQ(report.diagnostics[1].to_string(),
              "pipeline.json:5:63: stage 'b': field 'terminal': expected a boolean (true or "
              "false), got string \"yes\"");
    EXPECT_EQ(report.diagnostics[2].to_string(),
              "pipeline.json:6:6: stage 'b': field 'gpu': 'gpu' lists 2 GPUs but tp_size is 1; "
              "list one GPU per TP rank");
}

TEST(Load, EveryErrorIsReportedInSourceOrder) {
    const char* text = R"(model_path: m
bogus: 1
stages:
  - name: a
    process: p
    factory: f
    next: [b, missing]
    tp_size: x
  - name: b
    factory: f
    terminal: true
    gpu: -2
relay_backend: carrier-pigeon
)";
    auto report = load_report(text);
    std::vector<std::string> expected = {
        "test.yaml:2:1: field 'bogus': unknown key",
        "test.yaml:7:15: stage 'a': field 'next[1]': unknown stage 'missing' in 'next'",
        "test.yaml:8:14: stage 'a': field 'tp_size': expected an integer, got string \"x\"",
        "test.yaml:9:5: stage 'b': field 'process': 'process' is required for non-TP stages",
        "test.yaml:12:5: stage 'b': field 'gpu': GPU id must be >= 0 (got -2)",
        "test.yaml:13:1: field 'relay_backend': unknown relay_backend 'carrier-pigeon'",
    };
    ASSERT_EQ(report.diagnostics.size(), expected.size()) << testing::dump(report);
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_TRUE(report.diagnostics[i].to_string().starts_with(expected[i]))
            << report.diagnostics[i].to_string();
    }
    auto loaded =
        load_pipeline_text(text, "test.yaml", {.load_plugins = false, .check_registry = false});
    ASSERT_FALSE(loaded.has_value());
    EXPECT_EQ(loaded.error().code, ErrorCode::invalid_argument);
    EXPECT_EQ(loaded.error().message, format_diagnostics(report.diagnostics));
    EXPECT_EQ(std::count(loaded.error().message.begin(), loaded.error().message.end(), '\n'), 5);
}

TEST(Load, DefaultsOfAMinimalConfig) {
    auto report = load_report(
        "model_path: /m\nstages:\n  - {name: s, factory: f, process: p, "
        "terminal: true}\n");
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    const PipelineConfig& config = *report.config;
    EXPECT_EQ(config.resolved_name(), "/m");
    EXPECT_EQ(config.resolved_entry_stage(), "s");
    EXPECT_EQ(config.relay_backend, "shm");
    EXPECT_EQ(config.endpoints.scheme, EndpointScheme::ipc);
    EXPECT_EQ(config.endpoints.host, "127.0.0.1");
    EXPECT_EQ(config.endpoints.base_port, kDefaultTcpBasePort);
    EXPECT_FALSE(config.endpoints.base_path.has_value());
    EXPECT_EQ(config.gpu_memory_limit, 1.0);
    EXPECT_EQ(config.restart.max_restarts, kDefaultMaxRestarts);
    EXPECT_EQ(config.restart.window_s, kDefaultRestartWindowS);
    EXPECT_EQ(config.restart.backoff_initial_ms, kDefaultBackoffInitialMs);
    EXPECT_EQ(config.restart.backoff_max_ms, kDefaultBackoffMaxMs);
    EXPECT_EQ(config.source, "test.yaml");
    const StageConfig& stage = config.stages[0];
    EXPECT_EQ(stage.tp_size, 1);
    EXPECT_FALSE(stage.on_gpu());
    EXPECT_FALSE(stage.relay.has_value());
    EXPECT_EQ(stage.fan_in_timeout_s, kDefaultFanInTimeoutS);
    EXPECT_TRUE(stage.factory_args.empty());
}

TEST(Load, RestartPolicyIsRead) {
    std::string text =
        "restart: {max_restarts: 0, window_s: 1.5, backoff_initial_ms: 0, backoff_max_ms: 0}\n" +
        PipelineText::linear().text();
    auto report = load_report(text);
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    const RestartPolicy& policy = report.config->restart;
    EXPECT_EQ(policy.max_restarts, 0);
    EXPECT_EQ(policy.window_s, 1.5);
    EXPECT_EQ(policy.backoff_initial_ms, 0);
    EXPECT_EQ(policy.backoff_max_ms, 0);
}

TEST(Load, InvalidRestartPolicyValuesAreNamed) {
    std::string text =
        "restart:\n  max_restarts: -1\n  window_s: 0\n  backoff_initial_ms: 5000000\n"
        "  backoff_max_restarts: 1\n" +
        PipelineText::linear().text();
    auto report = load_report(text);
    EXPECT_TRUE(
        has_diagnostic(report, 2, "", "restart.max_restarts", "max_restarts -1 is outside 0..1000"))
        << testing::dump(report);
    EXPECT_TRUE(
        has_diagnostic(report, 3, "", "restart.window_s", "window_s must be in (0, 86400] seconds"))
        << testing::dump(report);
    EXPECT_TRUE(has_diagnostic(report, 4, "", "restart.backoff_initial_ms",
                               "backoff_initial_ms 5000000 is outside 0..3600000"))
        << testing::dump(report);
    EXPECT_TRUE(has_diagnostic(report, 5, "", "restart.backoff_max_restarts",
                               "unknown key (valid keys: max_restarts, window_s, "
                               "backoff_initial_ms, backoff_max_ms)"))
        << testing::dump(report);

    report = load_report("restart: {backoff_initial_ms: 100, backoff_max_ms: 10}\n" +
                         PipelineText::linear().text());
    EXPECT_TRUE(has_diagnostic(report, 1, "", "restart.backoff_max_ms",
                               "backoff_max_ms (10) is below backoff_initial_ms (100)"))
        << testing::dump(report);
}

TEST(Load, EveryFieldIsRead) {
    const char* text = R"(model_path: /m
name: full
entry_stage: a
relay_backend: ucx
fused_stages: [[a, b]]
runtime_overrides: {b: {max_batch: 4}}
env_defaults: {OMP_NUM_THREADS: 8}
endpoints: {scheme: tcp, base_path: /run/x, host: 10.0.0.1, base_port: 20000}
terminal_stages_fn: t.fn
config_cls: Qwen3OmniSpeechPipelineConfig
gpu_memory_limit: 0.9
stages:
  - name: a
    factory: f.a
    factory_args: {k: [1, 2]}
    process: front
    next: b
    route_fn: r.fn
    gpu: 0
    gpu_memory_fraction: 0.5
    stream_to: [b]
    stream_done_to_fn: s.fn
    project_payload: {b: p.fn}
    relay: {slot_size_mb: 8.5, credits: 2, rank: 0, world_size: 2, device: cpu}
  - name: b
    factory: f.b
    process: front
    gpu: [0]
    next: [c]
  - name: c
    factory: f.c
    tp_size: 2
    gpu: [1, 2]
    wait_for: [b]
    wait_for_fn: w.fn
    merge_fn: m.fn
    fan_in_timeout_s: 1.5
    terminal: true
)";
    auto report = load_report(text);
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    const PipelineConfig& config = *report.config;
    EXPECT_EQ(config.name, "full");
    EXPECT_EQ(config.entry_stage, "a");
    EXPECT_EQ(config.relay_backend, "ucx");
    EXPECT_EQ(config.runtime_overrides.at("b").at("max_batch"), Value(4));
    EXPECT_EQ(config.env_defaults.at("OMP_NUM_THREADS"), "8");
    EXPECT_EQ(config.endpoints.scheme, EndpointScheme::tcp);
    EXPECT_EQ(config.endpoints.base_path, "/run/x");
    EXPECT_EQ(config.endpoints.host, "10.0.0.1");
    EXPECT_EQ(config.endpoints.base_port, 20000);
    EXPECT_EQ(config.terminal_stages_fn, "t.fn");
    EXPECT_EQ(config.config_cls, "Qwen3OmniSpeechPipelineConfig");
    EXPECT_EQ(config.gpu_memory_limit, 0.9);
    const StageConfig& a = config.stages[0];
    EXPECT_EQ(a.factory_args.at("k"), Value(List{Value(1), Value(2)}));
    EXPECT_EQ(a.next, std::vector<std::string>{"b"});
    EXPECT_EQ(a.route_fn, "r.fn");
    EXPECT_EQ(a.gpu, std::vector<int>{0});
    EXPECT_FALSE(a.gpu_is_list);
    EXPECT_EQ(a.gpu_memory_fraction, 0.5);
    EXPECT_EQ(a.stream_done_to_fn, "s.fn");
    EXPECT_EQ(a.project_payload.at("b"), "p.fn");
    EXPECT_EQ(a.relay->slot_size_mb, 8.5);
    EXPECT_EQ(a.relay->device, "cpu");
    EXPECT_EQ(a.location_of("relay.credits").line, 24);
    EXPECT_EQ(a.location_of("next").to_string(), "test.yaml:17:5");
    EXPECT_TRUE(config.stages[1].gpu_is_list);
    const StageConfig& c = config.stages[2];
    EXPECT_EQ(c.tp_size, 2);
    EXPECT_EQ(c.gpu, (std::vector<int>{1, 2}));
    EXPECT_EQ(c.wait_for_fn, "w.fn");
    EXPECT_EQ(c.merge_fn, "m.fn");
    EXPECT_EQ(c.fan_in_timeout_s, 1.5);
    EXPECT_EQ(config.location_of("endpoints.base_port").line, 8);
}

TEST(Load, NullOptionalFieldsAreUnset) {
    auto p = PipelineText::linear()
                 .top("name", "~")
                 .top("entry_stage", "null")
                 .set("a", "route_fn", "")
                 .set("a", "gpu", "~")
                 .set("a", "factory_args", "")
                 .set("a", "relay", "~")
                 .top("fused_stages", "");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_FALSE(report.config->name.has_value());
    EXPECT_FALSE(report.config->stages[0].route_fn.has_value());
    EXPECT_FALSE(report.config->stages[0].on_gpu());
}

}  // namespace
}  // namespace omnirt::config
