// `--set path=value` overrides: YAML typing of the value, stage addressing by name, list
// indices, created keys, errors, and locations that point at the flag.
#include <gtest/gtest.h>

#include "config/load.h"
#include "pipeline_text.h"

namespace omnirt::config {
namespace {

using testing::has_diagnostic;
using testing::PipelineText;

LoadReport load_with(const PipelineText& text, std::vector<std::string> overrides) {
    return testing::load_report(
        text.text(),
        {.overrides = std::move(overrides), .load_plugins = false, .check_registry = false});
}

const Value* factory_arg(const LoadReport& report, const std::string& stage,
                         const std::string& key) {
    if (!report.config) return nullptr;
    const StageConfig* s = report.config->find_stage(stage);
    auto it = s->factory_args.find(key);
    return it == s->factory_args.end() ? nullptr : &it->second;
}

TEST(Overrides, PlainNumberIsAnInteger) {
    auto report = load_with(PipelineText::linear(), {"stages.b.factory_args.max_seq_len=4096"});
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_EQ(*factory_arg(report, "b", "max_seq_len"), Value(4096));
}

TEST(Overrides, QuotedNumberIsAString) {
    auto report = load_with(PipelineText::linear(), {"stages.b.factory_args.x=\"4096\""});
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_EQ(*factory_arg(report, "b", "x"), Value("4096"));
    report = load_with(PipelineText::linear(), {"stages.b.factory_args.x='4096'"});
    EXPECT_EQ(*factory_arg(report, "b", "x"), Value("4096"));
}

TEST(Overrides, BooleansFloatsNullsAndText) {
    auto report =
        load_with(PipelineText::linear(),
                  {"stages.b.factory_args.flag=true", "stages.b.factory_args.f=0.25",
                   "stages.b.factory_args.n=null",
                   "stages.b.factory_args.e=", "stages.b.factory_args.s=hello world",
                   "stages.b.factory_args.url=http://host:80/x", "stages.b.factory_args.kv=a: b"});
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_EQ(*factory_arg(report, "b", "flag"), Value(true));
    EXPECT_EQ(*factory_arg(report, "b", "f"), Value(0.25));
    EXPECT_TRUE(factory_arg(report, "b", "n")->is_null());
    EXPECT_TRUE(factory_arg(report, "b", "e")->is_null());
    EXPECT_EQ(*factory_arg(report, "b", "s"), Value("hello world"));
    EXPECT_EQ(*factory_arg(report, "b", "url"), Value("http://host:80/x"));
    // Text that YAML would read as a block map stays a string.
    EXPECT_EQ(*factory_arg(report, "b", "kv"), Value("a: b"));
}

TEST(Overrides, FlowListsAndMaps) {
    auto report = load_with(PipelineText::linear(),
                            {"stages.a.next=[b,c]", "stages.b.factory_args.opts={k: [1, 2]}"});
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_EQ(report.config->stages[0].next, (std::vector<std::string>{"b", "c"}));
    EXPECT_EQ(*factory_arg(report, "b", "opts"),
              Value(Map{{"k", Value(List{Value(1), Value(2)})}}));
}

TEST(Overrides, PipelineFieldsAndCreatedKeys) {
    auto report =
        load_with(PipelineText::linear(),
                  {"relay_backend=ucx", "endpoints.scheme=tcp", "endpoints.base_port=20000",
                   "runtime_overrides.b.max_batch=8", "env_defaults.OMP_NUM_THREADS=4"});
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    const PipelineConfig& config = *report.config;
    EXPECT_EQ(config.relay_backend, "ucx");
    EXPECT_EQ(config.endpoints.scheme, EndpointScheme::tcp);
    EXPECT_EQ(config.endpoints.base_port, 20000);
    EXPECT_EQ(config.runtime_overrides.at("b").at("max_batch"), Value(8));
    EXPECT_EQ(config.env_defaults.at("OMP_NUM_THREADS"), "4");
}

TEST(Overrides, LaterOverridesWin) {
    auto report = load_with(PipelineText::linear(), {"stages.b.gpu=0", "stages.b.gpu=[1]"});
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_EQ(report.config->stages[1].gpu, std::vector<int>{1});
    EXPECT_TRUE(report.config->stages[1].gpu_is_list);
}

TEST(Overrides, NullOnThePathBecomesAMap) {
    auto p = PipelineText::linear().set("b", "factory_args", "");
    auto report = load_with(p, {"stages.b.factory_args.k=v"});
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_EQ(*factory_arg(report, "b", "k"), Value("v"));
}

TEST(Overrides, ListItemsByIndex) {
    auto p = PipelineText::linear().set("a", "next", "[b, c]");
    auto report = load_with(p, {"stages.a.next.1=b"});
    EXPECT_TRUE(has_diagnostic(report, 0, "a", "next[1]", "'b' is listed twice in 'next'"));
    report = load_with(PipelineText::linear().top("fused_stages", "[[a, c]]"),
                       {"fused_stages.0.1=b", "stages.b.process=pa"});
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_EQ(report.config->fused_stages[0], (std::vector<std::string>{"a", "b"}));
}

TEST(Overrides, UnknownStageIsAnError) {
    auto report = load_with(PipelineText::linear(), {"stages.thinker.gpu=1"});
    ASSERT_EQ(report.diagnostics.size(), 1u) << testing::dump(report);
    EXPECT_EQ(report.diagnostics[0].to_string(),
              "--set stages.thinker.gpu=1: unknown stage 'thinker' (stages: a, b, c)");
}

TEST(Overrides, PathThroughAScalarIsAnError) {
    auto report = load_with(PipelineText::linear(), {"stages.a.factory.x=1", "model_path.y=2"});
    EXPECT_TRUE(has_diagnostic(report, 0, "", "",
                               "--set stages.a.factory.x=1: 'stages.a.factory' is string "
                               "\"test.a\"; cannot set 'x' inside it"));
    EXPECT_TRUE(has_diagnostic(report, 0, "", "", "'model_path' is string \"/models/test\""));
}

TEST(Overrides, BadPathsAreErrors) {
    auto report =
        load_with(PipelineText::linear().set("a", "next", "[b]"),
                  {"no_equals_sign", "stages..x=1", "stages.a.next.5=c", "stages.a.next.first=c",
                   "stages.a.next=[b,", "stages=1", "stages.a.gpu=1"});
    EXPECT_TRUE(
        has_diagnostic(report, 0, "", "", "--set no_equals_sign: expected --set path=value"));
    EXPECT_TRUE(has_diagnostic(report, 0, "", "", "empty segment in path 'stages..x'"));
    EXPECT_TRUE(
        has_diagnostic(report, 0, "", "", "index 5 is out of range for 'stages.a.next' (1 items)"));
    EXPECT_TRUE(has_diagnostic(report, 0, "", "",
                               "'stages.a.next' is a list: address its items by index, not "
                               "'first'"));
    EXPECT_TRUE(has_diagnostic(report, 0, "", "", "cannot parse the value '[b,'"));
    // `stages=1` replaced the list, so the stage cannot be addressed any more.
    EXPECT_TRUE(has_diagnostic(report, 0, "", "",
                               "cannot address stage 'a': 'stages' is integer 1, not a list"));
    EXPECT_TRUE(
        has_diagnostic(report, 0, "", "stages", "expected a list of stages, got integer 1"));
}

TEST(Overrides, ErrorsInOverriddenValuesPointAtTheFlag) {
    auto report = load_with(PipelineText::linear(), {"stages.b.tp_size=two", "relay_backend=rdma"});
    EXPECT_TRUE(has_diagnostic(report, 0, "b", "tp_size",
                               "--set stages.b.tp_size=two: stage 'b': field 'tp_size': expected "
                               "an integer, got string \"two\""));
    EXPECT_TRUE(has_diagnostic(report, 0, "", "relay_backend",
                               "--set relay_backend=rdma: field 'relay_backend': unknown "
                               "relay_backend 'rdma'"));
    // File diagnostics come first, then those of the flags, in flag order.
    auto unknown = load_with(PipelineText::linear().set("a", "bogus", "1"), {"stages.b.tp_size=x"});
    ASSERT_EQ(unknown.diagnostics.size(), 2u) << testing::dump(unknown);
    EXPECT_EQ(unknown.diagnostics[0].location.source, testing::kSource);
    EXPECT_EQ(unknown.diagnostics[1].location.source, "--set stages.b.tp_size=x");
}

TEST(Overrides, KeyCreatedByAFlagIsCheckedLikeAnyOther) {
    auto report = load_with(PipelineText::linear(), {"stages.b.procss=x"});
    EXPECT_TRUE(has_diagnostic(report, 0, "b", "procss",
                               "--set stages.b.procss=x: stage 'b': field 'procss': unknown key; "
                               "did you mean 'process'?"));
}

TEST(Overrides, ApplyOverrideOnADocument) {
    ConfigNode root;
    ASSERT_TRUE(apply_override(root, "a.b.c=1").has_value());
    ASSERT_TRUE(root.is_map());
    const ConfigNode* c = root.find("a")->find("b")->find("c");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(*to_value(*c), Value(1));
    EXPECT_EQ(c->location.to_string(), "--set a.b.c=1");
    EXPECT_EQ(root.find("a")->find_entry("b")->key_location.source, "--set a.b.c=1");
}

}  // namespace
}  // namespace omnirt::config
