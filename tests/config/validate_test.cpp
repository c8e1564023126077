// Field rules (relay, endpoints, relay_backend, env_defaults, timeouts), registry lookups, and
// a full nine-stage Qwen3-Omni speech pipeline as the positive case.
#include <gtest/gtest.h>

#include "config/load.h"
#include "pipeline_text.h"

namespace omnirt::config {
namespace {

using testing::has_diagnostic;
using testing::load_report;
using testing::PipelineText;

TEST(ValidateFields, UnknownRelayBackendIsAnError) {
    auto p = PipelineText::linear().top("relay_backend", "rdma");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("relay_backend"), "", "relay_backend",
                               "unknown relay_backend 'rdma' (known: 'shm', 'ucx', 'gloo', "
                               "'nccl', 'nixl', 'mooncake')"));
}

TEST(ValidateFields, EveryKnownRelayBackendIsAccepted) {
    for (const auto& backend : known_relay_backends()) {
        auto report = load_report(PipelineText::linear().top("relay_backend", backend).text());
        EXPECT_TRUE(report.ok()) << backend << "\n" << testing::dump(report);
    }
}

TEST(ValidateFields, RelayValuesAreRangeChecked) {
    auto p = PipelineText::linear().set(
        "b", "relay", "{slot_size_mb: 0, credits: 0, rank: -1, world_size: 0, device: gpu0}");
    auto report = load_report(p.text());
    int line = p.line("b", "relay");
    EXPECT_TRUE(has_diagnostic(report, line, "b", "relay.slot_size_mb", "must be > 0"));
    EXPECT_TRUE(has_diagnostic(report, line, "b", "relay.credits", "credits must be >= 1"));
    EXPECT_TRUE(has_diagnostic(report, line, "b", "relay.rank", "rank must be >= 0"));
    EXPECT_TRUE(has_diagnostic(report, line, "b", "relay.world_size", "world_size must be >= 1"));
    EXPECT_TRUE(has_diagnostic(report, line, "b", "relay.device",
                               "device 'gpu0' is not \"cpu\" or \"cuda:N\""));
}

TEST(ValidateFields, RelayRankMustBeBelowWorldSize) {
    auto p = PipelineText::linear().set("b", "relay", "{rank: 2, world_size: 2, device: cuda:1}");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "relay"), "b", "relay.rank",
                               "rank 2 is not below world_size 2"));
    EXPECT_EQ(report.diagnostics.size(), 1u) << testing::dump(report);
}

TEST(ValidateFields, ValidRelayIsRead) {
    auto p = PipelineText::linear().set(
        "b", "relay", "{slot_size_mb: 32, credits: 4, rank: 1, world_size: 3, device: 'cuda:0'}");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    const RelayConfig& relay = *report.config->stages[1].relay;
    EXPECT_EQ(relay.slot_size_mb, 32.0);
    EXPECT_EQ(relay.credits, 4);
    EXPECT_EQ(relay.rank, 1);
    EXPECT_EQ(relay.world_size, 3);
    EXPECT_EQ(relay.device, "cuda:0");
}

TEST(ValidateFields, EndpointsBasePortOutOfRangeIsAnError) {
    auto p = PipelineText::linear().top("endpoints", "{scheme: tcp, base_port: 70000}");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("endpoints"), "", "endpoints.base_port",
                               "base_port 70000 is outside 1..65535"));
}

TEST(ValidateFields, EndpointsUnknownSchemeIsAnError) {
    auto p = PipelineText::linear().top("endpoints", "{scheme: udp}");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("endpoints"), "", "endpoints.scheme",
                               "unknown scheme 'udp' (valid: ipc, tcp)"));
}

TEST(ValidateFields, EndpointsEmptyHostForTcpIsAnError) {
    auto p = PipelineText::linear().top("endpoints", "{scheme: tcp, host: ''}");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("endpoints"), "", "endpoints.host",
                               "host must not be empty for the tcp scheme"));
}

TEST(ValidateFields, EnvDefaultsTakeScalarsAsStrings) {
    auto p = PipelineText::linear().top("env_defaults", "{OMP_NUM_THREADS: 4, DEBUG: true, X: a}");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_EQ(report.config->env_defaults,
              (std::map<std::string, std::string>{
                  {"DEBUG", "true"}, {"OMP_NUM_THREADS", "4"}, {"X", "a"}}));
}

TEST(ValidateFields, EnvDefaultsRejectMaps) {
    auto p = PipelineText::linear().top("env_defaults", "{A: {b: 1}}");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("env_defaults"), "", "env_defaults.A",
                               "expected a string, got a map"));
}

TEST(ValidateFields, FanInTimeoutMustBePositive) {
    auto p = PipelineText::linear().set("c", "fan_in_timeout_s", "0");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "fan_in_timeout_s"), "c", "fan_in_timeout_s",
                               "must be a finite number > 0 (got 0)"));
}

TEST(ValidateFields, GpuMemoryFractionWithoutGpuIsAnError) {
    auto p = PipelineText::linear().set("c", "gpu_memory_fraction", "0.5");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "gpu_memory_fraction"), "c",
                               "gpu_memory_fraction", "set but the stage has no 'gpu'"));
}

// A registry with a few fake entries, passed through LoadOptions.
Registry& fake_registry() {
    static Registry* registry = [] {
        auto* r = new Registry;  // never destroyed: shared by every test of this binary
        for (auto [kind, name] : std::vector<std::pair<FunctionKind, std::string>>{
                 {FunctionKind::factory, "test.a"},
                 {FunctionKind::factory, "test.b"},
                 {FunctionKind::factory, "test.c"},
                 {FunctionKind::route, "test.route"},
                 {FunctionKind::merge, "test.merge"},
                 {FunctionKind::wait_for, "test.active"},
                 {FunctionKind::stream_done, "test.done"},
                 {FunctionKind::projection, "test.project"},
                 {FunctionKind::terminal_stages, "test.terminals"}}) {
            EXPECT_TRUE(r->add(kind, name, {}).has_value());
        }
        return r;
    }();
    return *registry;
}

LoadOptions with_registry() {
    return {.load_plugins = false, .check_registry = true, .registry = &fake_registry()};
}

PipelineText every_function_kind() {
    return PipelineText::linear()
        .top("terminal_stages_fn", "test.terminals")
        .set("a", "next", "[b, c]")
        .set("a", "route_fn", "test.route")
        .set("a", "project_payload", "{b: test.project}")
        .set("a", "stream_to", "[b]")
        .set("a", "stream_done_to_fn", "test.done")
        .set("c", "wait_for", "[a, b]")
        .set("c", "merge_fn", "test.merge")
        .set("c", "wait_for_fn", "test.active");
}

TEST(ValidateRegistry, RegisteredNamesResolve) {
    auto report = load_report(every_function_kind().text(), with_registry());
    EXPECT_TRUE(report.ok()) << testing::dump(report);
}

TEST(ValidateRegistry, UnknownNamesAreReportedForEveryKind) {
    auto p = PipelineText::linear()
                 .top("terminal_stages_fn", "x.terminals")
                 .set("a", "factory", "x.factory")
                 .set("a", "next", "[b, c]")
                 .set("a", "route_fn", "x.route")
                 .set("a", "project_payload", "{b: x.project}")
                 .set("a", "stream_to", "[b]")
                 .set("a", "stream_done_to_fn", "x.done")
                 .set("c", "wait_for", "[a, b]")
                 .set("c", "merge_fn", "x.merge")
                 .set("c", "wait_for_fn", "x.active");
    auto report = load_report(p.text(), with_registry());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "factory"), "a", "factory",
                               "unknown factory 'x.factory' (registered: test.a, test.b, test.c)"));
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "route_fn"), "a", "route_fn",
                               "unknown route_fn 'x.route' (registered: test.route)"));
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "project_payload"), "a", "project_payload.b",
                               "unknown projection 'x.project' (registered: test.project)"));
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "stream_done_to_fn"), "a", "stream_done_to_fn",
                               "unknown stream_done_to_fn 'x.done'"));
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "merge_fn"), "c", "merge_fn",
                               "unknown merge_fn 'x.merge' (registered: test.merge)"));
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "wait_for_fn"), "c", "wait_for_fn",
                               "unknown wait_for_fn 'x.active'"));
    EXPECT_TRUE(has_diagnostic(report, p.top_line("terminal_stages_fn"), "", "terminal_stages_fn",
                               "unknown terminal_stages_fn 'x.terminals'"));
    EXPECT_EQ(report.diagnostics.size(), 7u) << testing::dump(report);
}

TEST(ValidateRegistry, CheckRegistryFalseAcceptsUnknownNames) {
    auto p = PipelineText::linear().set("a", "factory", "x.factory");
    LoadOptions options = with_registry();
    options.check_registry = false;
    EXPECT_TRUE(load_report(p.text(), options).ok());
}

// config.md's Qwen3-Omni speech topology: nine stages, fan-out with projections, fan-in with a
// request-aware subset, thinker -> talker streaming, talker_ar <-> code_predictor feedback
// stream, and two GPUs (talker_ar, code_predictor and code2wav share GPU 1 with budgets).
constexpr const char* kQwen3OmniSpeech = R"(model_path: Qwen/Qwen3-Omni-30B-A3B-Instruct
name: qwen3-omni-speech
terminal_stages_fn: test.terminals
stages:
  - name: preprocessing
    process: preprocessing
    factory: test.a
    next: [image_encoder, audio_encoder, mm_aggregate]
    project_payload:
      image_encoder: test.project
      audio_encoder: test.project
      mm_aggregate: test.project
  - name: image_encoder
    process: encoders
    factory: test.a
    next: mm_aggregate
  - name: audio_encoder
    process: encoders
    factory: test.a
    next: mm_aggregate
  - name: mm_aggregate
    process: preprocessing
    factory: test.b
    wait_for: [preprocessing, image_encoder, audio_encoder]
    wait_for_fn: test.active
    merge_fn: test.merge
    next: thinker
  - name: thinker
    process: thinker
    factory: test.b
    factory_args: {speech_enabled: true, max_seq_len: 32768}
    gpu: 0
    next: [decode, talker_ar]
    route_fn: test.route
    stream_to: [talker_ar]
  - name: decode
    process: decode
    factory: test.c
    terminal: true
  - name: talker_ar
    process: talker
    factory: test.b
    gpu: 1
    gpu_memory_fraction: 0.6
    next: code_predictor
    stream_to: [code_predictor]
  - name: code_predictor
    process: talker
    factory: test.b
    gpu: 1
    gpu_memory_fraction: 0.1
    next: code2wav
    stream_to: [code2wav, talker_ar]
    stream_done_to_fn: test.done
  - name: code2wav
    process: code2wav
    factory: test.c
    gpu: 1
    gpu_memory_fraction: 0.2
    terminal: true
)";

TEST(ValidateQwen3Omni, NineStageSpeechPipelineIsValid) {
    auto report = load_report(kQwen3OmniSpeech, with_registry());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    const PipelineConfig& config = *report.config;
    EXPECT_EQ(config.stages.size(), 9u);
    EXPECT_EQ(config.resolved_entry_stage(), "preprocessing");
    EXPECT_EQ(config.terminal_stages(), (std::vector<std::string>{"decode", "code2wav"}));
    EXPECT_EQ(config.gpu_placement().at("code2wav"), std::vector<int>{1});
    const StageConfig* thinker = config.find_stage("thinker");
    EXPECT_EQ(thinker->next, (std::vector<std::string>{"decode", "talker_ar"}));
    EXPECT_EQ(thinker->factory_args.at("speech_enabled"), Value(true));
    EXPECT_EQ(thinker->factory_args.at("max_seq_len"), Value(32768));
    EXPECT_EQ(config.find_stage("mm_aggregate")->wait_for.size(), 3u);
    EXPECT_EQ(config.find_stage("preprocessing")->project_payload.size(), 3u);
    EXPECT_EQ(thinker->location_of("gpu").line, 32);
}

TEST(ValidateQwen3Omni, CodePredictorInItsOwnProcessNeedsBudgetsOnTheSharedGpu) {
    std::string text = kQwen3OmniSpeech;
    // code_predictor moves to its own process on GPU 1 and drops its budget.
    auto at = text.find("process: talker", text.find("name: code_predictor"));
    text.replace(at, 15, "process: cp");
    text.erase(text.find("    gpu_memory_fraction: 0.1\n"), 29);
    auto report = load_report(text, with_registry());
    EXPECT_TRUE(has_diagnostic(report, 0, "code_predictor", "gpu",
                               "GPU 1 is shared by process groups 'code2wav', 'cp', 'talker'; "
                               "every stage on a shared GPU must set gpu_memory_fraction "
                               "(missing on 'code_predictor')"));
    EXPECT_EQ(report.diagnostics.size(), 1u) << testing::dump(report);
}

TEST(ValidateQwen3Omni, ThinkerSharingTheTalkerGpuMustFitTheLimit) {
    std::string text = kQwen3OmniSpeech;
    text.replace(text.find("    gpu: 0\n"), 11, "    gpu: 1\n    gpu_memory_fraction: 0.5\n");
    auto report = load_report(text, with_registry());
    EXPECT_TRUE(has_diagnostic(report, 33, "thinker", "gpu_memory_fraction",
                               "budgets sum to 1.4, more than gpu_memory_limit 1"));
}

}  // namespace
}  // namespace omnirt::config
