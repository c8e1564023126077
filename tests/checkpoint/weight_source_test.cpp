// models::qwen3::WeightSource: load_format dummy (config.json only, seeded, deterministic, the
// same values make_checkpoint writes), load_format auto over a generated checkpoint, the
// progress it reports, and refused formats.
#include "models/qwen3/weight_source.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "models/qwen3/make_checkpoint.h"
#include "models/qwen3/weights.h"
#include "test_support.h"

namespace omnirt::models::qwen3 {
namespace {

using checkpoint::testing::TempDir;

void write_tiny_config(const std::filesystem::path& directory) {
    auto config = qwen3_preset("tiny");
    ASSERT_TRUE(config.has_value());
    std::ofstream(directory / "config.json") << to_json(*config).dump(2);
}

TEST(LoadFormat, ParsesKnownNamesAndRefusesOthers) {
    EXPECT_EQ(*parse_load_format("auto"), LoadFormat::automatic);
    EXPECT_EQ(*parse_load_format("safetensors"), LoadFormat::automatic);
    EXPECT_EQ(*parse_load_format("dummy"), LoadFormat::dummy);
    auto unknown = parse_load_format("pt");
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(unknown.error().message.find("auto, safetensors or dummy"), std::string::npos)
        << unknown.error().message;
}

TEST(WeightSource, DummyNeedsOnlyConfigAndIsDeterministicPerSeed) {
    TempDir dir;
    write_tiny_config(dir.path());
    auto open = [&](std::uint64_t seed) {
        auto source = WeightSource::open(
            dir.path(),
            {.format = LoadFormat::dummy, .dummy_dtype = DType::f32, .dummy_init = {.seed = seed}});
        EXPECT_TRUE(source.has_value()) << source.error().to_string();
        return std::move(*source);
    };
    auto first = open(3);
    auto again = open(3);
    auto other = open(4);
    const auto specs = tensor_specs(first->config(), DType::f32);
    EXPECT_EQ(first->tensors_total(), specs.size());
    std::uint64_t bytes = 0;
    for (const auto& spec : specs) {
        auto a = first->tensor(spec.name);
        auto b = again->tensor(spec.name);
        auto c = other->tensor(spec.name);
        ASSERT_TRUE(a && b && c) << spec.name;
        EXPECT_EQ(a->shape(), spec.shape) << spec.name;
        EXPECT_EQ(a->dtype(), DType::f32);
        EXPECT_TRUE(a->equals(*b)) << spec.name;
        EXPECT_FALSE(a->equals(*c)) << spec.name;
        bytes += a->nbytes();
    }
    EXPECT_EQ(first->bytes_total(), bytes);
    // Norm weights are centred on 1, the rest on 0.
    auto norm = first->tensor("model.norm.weight");
    ASSERT_TRUE(norm.has_value());
    EXPECT_NEAR(norm->data_as<float>()[0], 1.0, 0.1);
    auto unknown = first->tensor("model.layers.99.mlp.up_proj.weight");
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
}

TEST(WeightSource, DummyEqualsTheCheckpointMakeCheckpointWritesWithTheSameSeed) {
    TempDir dir;
    auto made =
        make_checkpoint(dir.path() / "made",
                        {.preset = "tiny", .seed = 11, .dtype = DType::bf16, .init_std = 0.02});
    ASSERT_TRUE(made.has_value()) << made.error().to_string();
    auto from_file = WeightSource::open(dir.path() / "made", {});
    auto dummy = WeightSource::open(
        dir.path() / "made",
        {.format = LoadFormat::dummy, .dummy_dtype = DType::bf16, .dummy_init = {.seed = 11}});
    ASSERT_TRUE(from_file && dummy);
    EXPECT_EQ((*from_file)->bytes_total(), (*dummy)->bytes_total());
    for (const auto& spec : tensor_specs(made->config, DType::bf16)) {
        auto stored = (*from_file)->tensor(spec.name);
        auto generated = (*dummy)->tensor(spec.name);
        ASSERT_TRUE(stored && generated) << spec.name;
        EXPECT_TRUE(stored->equals(*generated)) << spec.name;
    }
}

TEST(WeightSource, ErrorsNameWhatIsMissing) {
    TempDir dir;
    auto no_config = WeightSource::open(dir.path(), {.format = LoadFormat::dummy});
    ASSERT_FALSE(no_config.has_value());
    EXPECT_EQ(no_config.error().code, ErrorCode::not_found);
    EXPECT_NE(no_config.error().message.find("config.json"), std::string::npos);
    // auto needs the weights, dummy does not.
    write_tiny_config(dir.path());
    auto no_weights = WeightSource::open(dir.path(), {});
    ASSERT_FALSE(no_weights.has_value());
    EXPECT_EQ(no_weights.error().code, ErrorCode::not_found);
    EXPECT_TRUE(WeightSource::open(dir.path(), {.format = LoadFormat::dummy}).has_value());
    std::ofstream(dir / "config.json") << R"({"model_type": "qwen3"})";
    auto bad_config = WeightSource::open(dir.path(), {.format = LoadFormat::dummy});
    ASSERT_FALSE(bad_config.has_value());
    EXPECT_EQ(bad_config.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(bad_config.error().message.find("config.json"), std::string::npos);
}

// Progress: zero first, then one report per finished tensor, the last at finish() with
// everything done; bytes grow with the tensors and end at the total.
void expect_progress(WeightSource& source, const std::vector<checkpoint::Progress>& reports,
                     std::size_t asked) {
    ASSERT_EQ(reports.size(), asked + 1);
    EXPECT_EQ(reports.front().tensors_done, 0u);
    EXPECT_EQ(reports.front().bytes_done, 0u);
    for (std::size_t i = 1; i < reports.size(); ++i) {
        EXPECT_EQ(reports[i].tensors_total, source.tensors_total());
        EXPECT_EQ(reports[i].bytes_total, source.bytes_total());
        EXPECT_GT(reports[i].tensors_done, reports[i - 1].tensors_done);
        EXPECT_GT(reports[i].bytes_done, reports[i - 1].bytes_done);
    }
    EXPECT_EQ(reports.back().tensors_done, source.tensors_total());
    EXPECT_EQ(reports.back().bytes_done, source.bytes_total());
}

TEST(WeightSource, ReportsProgressOfWhatTheModelAsksFor) {
    TempDir dir;
    auto made = make_checkpoint(dir.path(), {.preset = "tiny", .seed = 2});
    ASSERT_TRUE(made.has_value());
    for (LoadFormat format : {LoadFormat::automatic, LoadFormat::dummy}) {
        std::vector<checkpoint::Progress> reports;
        auto source = WeightSource::open(
            dir.path(), {.format = format,
                         .progress = [&](const checkpoint::Progress& p) { reports.push_back(p); }});
        ASSERT_TRUE(source.has_value());
        const auto specs = tensor_specs(made->config, DType::bf16);
        EXPECT_EQ((*source)->bytes_total(), made->weights.tensor_bytes);
        for (const auto& spec : specs) ASSERT_TRUE((*source)->tensor(spec.name).has_value());
        // The last tensor is reported by finish(), once the caller is done with it.
        EXPECT_EQ(reports.size(), specs.size());
        (*source)->finish();
        (*source)->finish();  // idempotent
        expect_progress(**source, reports, specs.size());
    }
}

TEST(WeightSource, ProgressFeedsTheTerminalPrinter) {
    TempDir dir;
    write_tiny_config(dir.path());
    std::FILE* stream = std::tmpfile();
    ASSERT_NE(stream, nullptr);
    auto source = WeightSource::open(
        dir.path(), {.format = LoadFormat::dummy,
                     .progress = checkpoint::terminal_progress("loading tiny", stream)});
    ASSERT_TRUE(source.has_value());
    for (const auto& spec : tensor_specs((*source)->config(), DType::bf16)) {
        ASSERT_TRUE((*source)->tensor(spec.name).has_value());
    }
    (*source)->finish();
    std::rewind(stream);
    std::string text;
    char buffer[256];
    while (std::fgets(buffer, sizeof buffer, stream) != nullptr) text += buffer;
    std::fclose(stream);
    const std::string last = std::to_string((*source)->tensors_total()) + " / " +
                             std::to_string((*source)->tensors_total()) + " tensors (100%)";
    EXPECT_NE(text.find("loading tiny: "), std::string::npos) << text;
    EXPECT_NE(text.find(last), std::string::npos) << text;
}

}  // namespace
}  // namespace omnirt::models::qwen3
