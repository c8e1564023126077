// Routing, fan-in, streaming and reference rules (config.md "Routing rule"), one test per
// rule, each on a small YAML config with the line, stage, field and reason checked.
#include <gtest/gtest.h>

#include "config/load.h"
#include "config/validate.h"
#include "pipeline_text.h"

namespace omnirt::config {
namespace {

using testing::has_diagnostic;
using testing::load_report;
using testing::PipelineText;

TEST(ValidateRouting, BaseConfigIsValid) {
    auto report = load_report(PipelineText::linear().text());
    EXPECT_TRUE(report.ok()) << testing::dump(report);
    ASSERT_TRUE(report.config.has_value());
    EXPECT_EQ(report.config->stages.size(), 3u);
}

TEST(ValidateRouting, NextAndTerminalTogetherIsAnError) {
    auto p = PipelineText::linear().set("b", "terminal", "true");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "terminal"), "b", "terminal",
                               "set exactly one of 'next' or 'terminal: true', not both"));
    EXPECT_FALSE(report.config.has_value());
}

TEST(ValidateRouting, NeitherNextNorTerminalIsAnError) {
    auto p = PipelineText::linear().erase("b", "next");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "name"), "b", "next", "has neither"));
}

TEST(ValidateRouting, TerminalFalseWithoutNextIsAnError) {
    auto p = PipelineText::linear().set("c", "terminal", "false");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "name"), "c", "next", "has neither"));
}

TEST(ValidateRouting, EmptyNextListIsAnError) {
    auto p = PipelineText::linear().set("b", "next", "[]");
    auto report = load_report(p.text());
    EXPECT_TRUE(
        has_diagnostic(report, p.line("b", "next"), "b", "next", "'next: []' routes nowhere"));
    // Reported once: the routing rule does not repeat it.
    EXPECT_EQ(report.diagnostics.size(), 1u) << testing::dump(report);
}

TEST(ValidateRouting, RouteFnOnTerminalStageIsAnError) {
    auto p = PipelineText::linear().set("c", "route_fn", "test.route");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "route_fn"), "c", "route_fn",
                               "'route_fn' is not valid on a terminal stage"));
}

TEST(ValidateRouting, RouteFnWithNextIsValid) {
    auto p = PipelineText::linear().set("a", "route_fn", "test.route");
    EXPECT_TRUE(load_report(p.text()).ok());
}

TEST(ValidateRouting, WaitForWithoutMergeFnIsAnError) {
    auto p = PipelineText::linear().set("c", "wait_for", "[b]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "wait_for"), "c", "wait_for",
                               "'wait_for' needs 'merge_fn'"));
}

TEST(ValidateRouting, MergeFnWithoutWaitForIsAnError) {
    auto p = PipelineText::linear().set("c", "merge_fn", "test.merge");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "merge_fn"), "c", "merge_fn",
                               "'merge_fn' needs 'wait_for'"));
}

TEST(ValidateRouting, WaitForFnWithoutWaitForIsAnError) {
    auto p = PipelineText::linear().set("c", "wait_for_fn", "test.active");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "wait_for_fn"), "c", "wait_for_fn",
                               "'wait_for_fn' needs 'wait_for'"));
}

TEST(ValidateRouting, FanInWithMergeFnIsValid) {
    auto p = PipelineText::linear()
                 .set("a", "next", "[b, c]")
                 .set("c", "wait_for", "[a, b]")
                 .set("c", "merge_fn", "test.merge")
                 .set("c", "wait_for_fn", "test.active");
    auto report = load_report(p.text());
    EXPECT_TRUE(report.ok()) << testing::dump(report);
}

TEST(ValidateRouting, WaitForSourceMustRouteToTheWaitingStage) {
    auto p = PipelineText::linear().set("c", "wait_for", "[a, b]").set("c", "merge_fn", "test.m");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "wait_for"), "c", "wait_for[0]",
                               "wait_for source 'a' does not route to 'c'; add it to the 'next' "
                               "of 'a'"));
    EXPECT_EQ(report.diagnostics.size(), 1u) << testing::dump(report);
}

TEST(ValidateRouting, StreamDoneToFnWithoutStreamToIsAnError) {
    auto p = PipelineText::linear().set("a", "stream_done_to_fn", "test.done");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "stream_done_to_fn"), "a", "stream_done_to_fn",
                               "'stream_done_to_fn' needs 'stream_to'"));
}

TEST(ValidateRouting, StreamToSelfIsAnError) {
    auto p = PipelineText::linear().set("b", "stream_to", "[c, b]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "stream_to"), "b", "stream_to[1]",
                               "'stream_to' streams the stage to itself"));
}

TEST(ValidateRouting, UnknownStreamTargetIsAnError) {
    auto p = PipelineText::linear().set("a", "stream_to", "[zz]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "stream_to"), "a", "stream_to[0]",
                               "unknown stage 'zz' in 'stream_to' (stages: a, b, c)"));
}

TEST(ValidateRouting, EmptyStageNameIsAnError) {
    auto p = PipelineText::linear().set("b", "name", "''");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "name"), "stages[1]", "name",
                               "stage name must not be empty"));
}

TEST(ValidateRouting, DuplicateStageNameIsAnError) {
    auto p = PipelineText::linear().set("c", "name", "a");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "name"), "a", "name",
                               "duplicate stage name 'a' (first defined at test.yaml:" +
                                   std::to_string(p.line("a", "name")) + ":5)"));
}

TEST(ValidateRouting, UnknownNextTargetIsAnError) {
    auto p = PipelineText::linear().set("a", "next", "[b, nope]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "next"), "a", "next[1]",
                               "unknown stage 'nope' in 'next' (stages: a, b, c)"));
}

TEST(ValidateRouting, UnknownWaitForSourceIsAnError) {
    auto p = PipelineText::linear().set("c", "wait_for", "[b, ghost]").set("c", "merge_fn", "m");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "wait_for"), "c", "wait_for[1]",
                               "unknown stage 'ghost' in 'wait_for'"));
}

TEST(ValidateRouting, NextListedTwiceIsAnError) {
    auto p = PipelineText::linear().set("a", "next", "[b, b]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "next"), "a", "next[1]",
                               "'b' is listed twice in 'next'"));
}

TEST(ValidateRouting, ProjectPayloadTargetMustExist) {
    auto p = PipelineText::linear().set("a", "project_payload", "{zz: test.project}");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "project_payload"), "a", "project_payload.zz",
                               "unknown stage 'zz' in 'project_payload'"));
}

TEST(ValidateRouting, ProjectPayloadTargetMustBeANextTarget) {
    auto p = PipelineText::linear().set("a", "project_payload", "{c: test.project}");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "project_payload"), "a", "project_payload.c",
                               "project_payload target 'c' is not among the 'next' targets"));
}

TEST(ValidateRouting, UnknownEntryStageIsAnError) {
    auto p = PipelineText::linear().top("entry_stage", "start");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("entry_stage"), "", "entry_stage",
                               "unknown stage 'start' (stages: a, b, c)"));
}

TEST(ValidateRouting, UnknownRuntimeOverridesStageIsAnError) {
    auto p = PipelineText::linear().top("runtime_overrides", "{b: {x: 1}, q: {y: 2}}");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("runtime_overrides"), "", "runtime_overrides.q",
                               "unknown stage 'q' in 'runtime_overrides'"));
    EXPECT_EQ(report.diagnostics.size(), 1u) << testing::dump(report);
}

TEST(ValidateRouting, SelfLoopInNextIsAnError) {
    auto p = PipelineText::linear().set("b", "next", "[c, b]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "next"), "b", "next[1]",
                               "'next' routes the stage to itself"));
}

TEST(ValidateRouting, WaitingForItselfIsAnError) {
    auto p = PipelineText::linear().set("c", "wait_for", "[b, c]").set("c", "merge_fn", "m");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "wait_for"), "c", "wait_for[1]",
                               "makes the stage wait for itself"));
}

TEST(ValidateRouting, RoutingCycleIsReportedWithItsPath) {
    auto p = PipelineText::linear().set("c", "next", "a").erase("c", "terminal");
    p.add_stage("d", {{"process", "pd"}, {"factory", "f"}, {"terminal", "true"}});
    p.set("b", "next", "[c, d]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "next"), "a", "next",
                               "routing cycle through 'next': a -> b -> c -> a"));
    EXPECT_EQ(report.diagnostics.size(), 1u) << testing::dump(report);
}

TEST(ValidateRouting, TwoCyclesAreBothReported) {
    auto p = PipelineText::linear()
                 .set("b", "next", "[a, c]")
                 .set("c", "next", "b")
                 .erase("c", "terminal");
    p.add_stage("d", {{"process", "pd"}, {"factory", "f"}, {"terminal", "true"}});
    p.set("a", "next", "[b, d]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, 0, "a", "next", "a -> b -> a"));
    EXPECT_TRUE(has_diagnostic(report, 0, "b", "next", "b -> c -> b"));
}

TEST(ValidateRouting, NoTerminalStageIsAnError) {
    auto p = PipelineText::linear().set("c", "next", "a").erase("c", "terminal");
    auto report = load_report(p.text());
    EXPECT_TRUE(
        has_diagnostic(report, p.top_line("model_path") + 1, "", "stages", "no stage is terminal"));
}

TEST(ValidateRouting, StructWithoutLocationsValidates) {
    PipelineConfig config;
    config.model_path = "/m";
    StageConfig a;
    a.name = "a";
    a.factory = "f";
    a.process = "p";
    a.terminal = true;
    a.next = {"a"};
    config.stages = {a};
    auto diagnostics = validate_pipeline(config, {.check_registry = false});
    ASSERT_EQ(diagnostics.size(), 2u) << format_diagnostics(diagnostics);
    EXPECT_EQ(diagnostics[0].to_string(),
              "stage 'a': field 'terminal': set exactly one of 'next' or 'terminal: true', not "
              "both");
}

}  // namespace
}  // namespace omnirt::config
