// Placement rules: process, tensor parallelism, stage fusion, process groups and GPU sharing
// (config.md "Runtime Prep and Runner", "Stage Fusion", "Tensor Parallelism").
#include <gtest/gtest.h>

#include "config/load.h"
#include "pipeline_text.h"

namespace omnirt::config {
namespace {

using testing::has_diagnostic;
using testing::load_report;
using testing::PipelineText;

TEST(ValidatePlacement, ProcessIsRequiredForNonTpStages) {
    auto p = PipelineText::linear().erase("b", "process");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "name"), "b", "process",
                               "'process' is required for non-TP stages"));
}

TEST(ValidatePlacement, TpStageNeedsNoProcess) {
    auto p = PipelineText::linear()
                 .erase("b", "process")
                 .set("b", "tp_size", "2")
                 .set("b", "gpu", "[0, 1]");
    auto report = load_report(p.text());
    EXPECT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_TRUE(report.config->stages[1].gpu_is_list);
}

TEST(ValidatePlacement, TpSizeBelowOneIsAnError) {
    auto p = PipelineText::linear().set("b", "tp_size", "0");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "tp_size"), "b", "tp_size",
                               "tp_size must be >= 1 (got 0)"));
}

TEST(ValidatePlacement, GpuListLengthMustEqualTpSize) {
    auto p = PipelineText::linear().set("b", "tp_size", "4").set("b", "gpu", "[0, 1]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "gpu"), "b", "gpu",
                               "'gpu' lists 2 GPUs but tp_size is 4"));
}

TEST(ValidatePlacement, GpuListLongerThanDefaultTpSizeIsAnError) {
    auto p = PipelineText::linear().set("b", "gpu", "[0, 1]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "gpu"), "b", "gpu",
                               "'gpu' lists 2 GPUs but tp_size is 1"));
}

TEST(ValidatePlacement, SingleGpuIdWithTpSizeAboveOneIsAnError) {
    auto p = PipelineText::linear().set("b", "tp_size", "2").set("b", "gpu", "0");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "gpu"), "b", "gpu",
                               "'gpu' is a single id but tp_size is 2"));
}

TEST(ValidatePlacement, CpuTensorParallelismIsAllowed) {
    auto p = PipelineText::linear().set("b", "tp_size", "2");
    auto report = load_report(p.text());
    EXPECT_TRUE(report.ok()) << testing::dump(report);
}

TEST(ValidatePlacement, TpRanksNeedDistinctGpus) {
    auto p = PipelineText::linear().set("b", "tp_size", "2").set("b", "gpu", "[1, 1]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "gpu"), "b", "gpu[1]",
                               "GPU 1 is listed twice; each TP rank needs its own GPU"));
}

TEST(ValidatePlacement, NegativeGpuIdIsAnError) {
    auto p = PipelineText::linear().set("a", "gpu", "-1");
    auto report = load_report(p.text());
    EXPECT_TRUE(
        has_diagnostic(report, p.line("a", "gpu"), "a", "gpu", "GPU id must be >= 0 (got -1)"));
}

TEST(ValidatePlacement, TpStageOwnsItsDerivedProcessNames) {
    auto p = PipelineText::linear().set("b", "tp_size", "2").set("c", "process", "pb_tp1");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "process"), "c", "process",
                               "process name 'pb_tp1' is used by stage 'b' and stage 'c'; TP "
                               "stage 'b' owns its processes ('pb', 'pb_tp0', 'pb_tp1') "
                               "exclusively"));
}

TEST(ValidatePlacement, TpStageOwnsItsPrefix) {
    // A TP stage without `process` uses its name as the prefix.
    auto p = PipelineText::linear()
                 .erase("b", "process")
                 .set("b", "tp_size", "2")
                 .set("c", "process", "b");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "process"), "c", "process",
                               "TP stage 'b' owns its processes ('b', 'b_tp0', 'b_tp1')"));
}

TEST(ValidatePlacement, TwoTpStagesMayNotShareAPrefix) {
    auto p = PipelineText::linear()
                 .set("a", "tp_size", "2")
                 .set("b", "tp_size", "2")
                 .set("b", "process", "pa");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "process"), "b", "process",
                               "process name 'pa' is used by stage 'a' and stage 'b'"));
}

TEST(ValidatePlacement, ProcessGroupMayUseAtMostOneGpu) {
    auto p = PipelineText::linear()
                 .set("a", "process", "shared")
                 .set("b", "process", "shared")
                 .set("a", "gpu", "0")
                 .set("b", "gpu", "1");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "gpu"), "b", "gpu",
                               "process group 'shared' already uses GPU 0 (stage 'a'); a process "
                               "group may hold CPU stages and stages of at most one GPU"));
}

TEST(ValidatePlacement, ProcessGroupWithCpuStagesAndOneGpuIsValid) {
    auto p = PipelineText::linear()
                 .set("a", "process", "shared")
                 .set("b", "process", "shared")
                 .set("c", "process", "shared")
                 .set("b", "gpu", "1")
                 .set("c", "gpu", "1");
    auto report = load_report(p.text());
    EXPECT_TRUE(report.ok()) << testing::dump(report);
}

TEST(ValidatePlacement, FusionMergesProcessGroupsForTheOneGpuRule) {
    // a (GPU 0) and c (GPU 1) are in different processes, but b shares a's process and the
    // fused group [b, c] (itself on one GPU) merges c's process into it.
    auto p = PipelineText::linear()
                 .set("b", "process", "pa")
                 .set("a", "gpu", "0")
                 .set("c", "gpu", "1")
                 .top("fused_stages", "[[b, c]]");
    auto report = load_report(p.text());
    EXPECT_EQ(report.diagnostics.size(), 1u) << testing::dump(report);
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "gpu"), "c", "gpu",
                               "process group 'pa+pc' already uses GPU 0 (stage 'a')"));
}

TEST(ValidatePlacement, SharedGpuNeedsMemoryBudgets) {
    auto p = PipelineText::linear()
                 .set("a", "gpu", "0")
                 .set("b", "gpu", "0")
                 .set("a", "gpu_memory_fraction", "0.5");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "gpu"), "b", "gpu",
                               "GPU 0 is shared by process groups 'pa', 'pb'; every stage on a "
                               "shared GPU must set gpu_memory_fraction (missing on 'b')"));
}

TEST(ValidatePlacement, SharedGpuBudgetsMustFitTheLimit) {
    auto p = PipelineText::linear()
                 .top("gpu_memory_limit", "0.9")
                 .set("a", "gpu", "0")
                 .set("b", "gpu", "0")
                 .set("a", "gpu_memory_fraction", "0.5")
                 .set("b", "gpu_memory_fraction", "0.5");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "gpu_memory_fraction"), "a",
                               "gpu_memory_fraction",
                               "GPU 0 (process groups 'pa', 'pb'): gpu_memory_fraction budgets "
                               "sum to 1, more than gpu_memory_limit 0.9"));
}

TEST(ValidatePlacement, SharedGpuWithinBudgetIsValid) {
    auto p = PipelineText::linear()
                 .set("a", "gpu", "0")
                 .set("b", "gpu", "0")
                 .set("a", "gpu_memory_fraction", "0.4")
                 .set("b", "gpu_memory_fraction", "0.6");
    auto report = load_report(p.text());
    EXPECT_TRUE(report.ok()) << testing::dump(report);
}

TEST(ValidatePlacement, TpRankSharingAGpuNeedsBudgets) {
    auto p = PipelineText::linear()
                 .set("a", "tp_size", "2")
                 .set("a", "gpu", "[0, 1]")
                 .set("b", "gpu", "1");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "gpu"), "a", "gpu",
                               "GPU 1 is shared by process groups 'pa_tp1', 'pb'"));
}

TEST(ValidatePlacement, GpuMemoryFractionOutOfRangeIsAnError) {
    auto p = PipelineText::linear().set("a", "gpu", "0").set("a", "gpu_memory_fraction", "1.5");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("a", "gpu_memory_fraction"), "a",
                               "gpu_memory_fraction", "must be in (0, 1] (got 1.5)"));
}

TEST(ValidatePlacement, GpuMemoryLimitOutOfRangeIsAnError) {
    auto p = PipelineText::linear().top("gpu_memory_limit", "0");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("gpu_memory_limit"), "", "gpu_memory_limit",
                               "gpu_memory_limit must be in (0, 1] (got 0)"));
}

TEST(ValidateFusion, ValidGroupOnOneGpu) {
    auto p = PipelineText::linear()
                 .set("a", "gpu", "0")
                 .set("b", "gpu", "0")
                 .set("b", "process", "pa")
                 .top("fused_stages", "[[a, b]]");
    auto report = load_report(p.text());
    EXPECT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_EQ(report.config->fused_stages, (std::vector<std::vector<std::string>>{{"a", "b"}}));
}

TEST(ValidateFusion, GroupNeedsTwoStages) {
    auto p = PipelineText::linear().top("fused_stages", "[[a]]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("fused_stages"), "", "fused_stages[0]",
                               "a fused group needs at least 2 stages (got 1)"));
}

TEST(ValidateFusion, MembersMustExist) {
    auto p = PipelineText::linear().top("fused_stages", "[[a, x]]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("fused_stages"), "", "fused_stages[0][1]",
                               "unknown stage 'x' in 'fused_stages'"));
}

TEST(ValidateFusion, StageInTwoGroupsIsAnError) {
    auto p = PipelineText::linear().top("fused_stages", "[[a, b], [b, c]]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("fused_stages"), "", "fused_stages[1][0]",
                               "stage 'b' is already in fused_stages[0]"));
}

TEST(ValidateFusion, MembersMustBeAdjacentAndLinear) {
    auto p = PipelineText::linear().top("fused_stages", "[[a, c]]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("fused_stages"), "", "fused_stages[0][0]",
                               "fused stages must be adjacent and linear: 'a' must route only to "
                               "'c' (its next is [b])"));
}

TEST(ValidateFusion, InternalStageWithFanOutIsNotLinear) {
    auto p = PipelineText::linear().set("a", "next", "[b, c]").top("fused_stages", "[[a, b]]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, 0, "", "fused_stages[0][0]", "(its next is [b, c])"));
}

TEST(ValidateFusion, TpStageCannotBeFused) {
    auto p = PipelineText::linear().set("b", "tp_size", "2").top("fused_stages", "[[a, b]]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, 0, "", "fused_stages[0][1]",
                               "stage 'b' is a TP stage (tp_size 2); fused stages are non-TP"));
}

TEST(ValidateFusion, GroupMustFitOnOneGpu) {
    auto p = PipelineText::linear()
                 .set("a", "gpu", "0")
                 .set("b", "gpu", "1")
                 .top("fused_stages", "[[a, b]]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("fused_stages"), "", "fused_stages[0]",
                               "the fused group spans GPUs [0, 1]; a fused group must fit on at "
                               "most one GPU"));
}

}  // namespace
}  // namespace omnirt::config
