// Checkpoint: single-file and sharded Hugging Face directories, loading with progress and dtype
// conversion, and the errors of broken directories.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint/test_support.h"

namespace omnirt::checkpoint {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::write_text;

std::vector<std::pair<std::string, Tensor>> sample_tensors() {
    return {
        {"model.embed_tokens.weight", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2})},
        {"model.norm.weight", Tensor::from_vector<float>({0.5f, 0.25f})},
        {"model.positions", Tensor::from_vector<std::int64_t>({0, 1, 2})},
        {"lm_head.weight", Tensor::from_vector<float>({-1, -2, -3, -4, -5, -6}, {3, 2})},
    };
}

std::vector<TensorSource> sources(const std::vector<std::pair<std::string, Tensor>>& tensors) {
    std::vector<TensorSource> out;
    for (const auto& [name, tensor] : tensors) out.push_back(tensor_source(name, tensor));
    return out;
}

void write_config(const TempDir& dir) {
    write_text(dir / "config.json", R"({"model_type": "test"})");
}

TEST(Checkpoint, SingleFile) {
    TempDir dir;
    write_config(dir);
    const auto tensors = sample_tensors();
    ASSERT_TRUE(write_safetensors(dir / "model.safetensors", tensors));
    auto checkpoint = Checkpoint::open(dir.path());
    ASSERT_TRUE(checkpoint) << checkpoint.error().to_string();
    const Checkpoint& c = **checkpoint;
    EXPECT_EQ(c.config()["model_type"], "test");
    EXPECT_FALSE(c.sharded());
    EXPECT_EQ(c.files().size(), 1u);
    EXPECT_EQ(c.tensor_count(), 4u);
    EXPECT_EQ(c.total_bytes(), 24u + 8u + 24u + 24u);
    EXPECT_THAT(c.tensor_names(), ElementsAre("lm_head.weight", "model.embed_tokens.weight",
                                              "model.norm.weight", "model.positions"));
    for (const auto& [name, tensor] : tensors) {
        auto view = c.tensor(name);
        ASSERT_TRUE(view) << name;
        EXPECT_TRUE(view->equals(tensor));
        EXPECT_TRUE(view->read_only());
    }
    auto info = c.info("model.norm.weight");
    ASSERT_TRUE(info);
    EXPECT_EQ(info->dtype, DType::f32);
    EXPECT_EQ(info->shape, (Shape{2}));
    EXPECT_EQ(info->nbytes, 8u);
    EXPECT_EQ(info->file, dir / "model.safetensors");
    EXPECT_EQ(c.info("nope").error().code, ErrorCode::not_found);
    EXPECT_FALSE(c.contains("nope"));
    EXPECT_EQ(c.find("nope"), nullptr);
}

TEST(Checkpoint, LoadTensorConvertsIntoOwnedTensors) {
    TempDir dir;
    write_config(dir);
    ASSERT_TRUE(write_safetensors(dir / "model.safetensors", sample_tensors()));
    auto checkpoint = *Checkpoint::open(dir.path());
    auto bf16 = checkpoint->load_tensor("model.norm.weight", DType::bf16);
    ASSERT_TRUE(bf16);
    EXPECT_EQ(bf16->dtype(), DType::bf16);
    EXPECT_FALSE(bf16->read_only());
    std::uint16_t first;
    std::memcpy(&first, bf16->data(), 2);
    EXPECT_EQ(first, float_to_bf16(0.5f));
    auto copy = checkpoint->load_tensor("model.norm.weight", DType::f32);
    ASSERT_TRUE(copy);
    EXPECT_FALSE(copy->read_only());
    auto ints = checkpoint->load_tensor("model.positions", DType::f32);
    ASSERT_FALSE(ints);
    EXPECT_EQ(ints.error().code, ErrorCode::unimplemented);
    EXPECT_THAT(ints.error().message, HasSubstr("model.positions"));
}

TEST(Checkpoint, LoadAllReportsProgressAndConvertsFloatsOnly) {
    TempDir dir;
    write_config(dir);
    ASSERT_TRUE(write_safetensors(dir / "model.safetensors", sample_tensors()));
    auto checkpoint = *Checkpoint::open(dir.path());
    std::vector<Progress> progress;
    std::map<std::string, Tensor> loaded;
    ASSERT_TRUE(checkpoint->load_all(
        [&](const std::string& name, Tensor tensor) {
            loaded.emplace(name, std::move(tensor));
            return ok_status();
        },
        {.dtype = DType::bf16, .progress = [&](const Progress& p) { progress.push_back(p); }}));
    ASSERT_EQ(loaded.size(), 4u);
    EXPECT_EQ(loaded.at("model.embed_tokens.weight").dtype(), DType::bf16);
    EXPECT_EQ(loaded.at("model.positions").dtype(), DType::i64);
    EXPECT_TRUE(loaded.at("model.positions").read_only());  // a view, not converted
    ASSERT_EQ(progress.size(), 5u);
    EXPECT_EQ(progress.front().tensors_done, 0u);
    EXPECT_EQ(progress.front().bytes_done, 0u);
    for (std::size_t i = 1; i < progress.size(); ++i) {
        EXPECT_GT(progress[i].bytes_done, progress[i - 1].bytes_done);
        EXPECT_EQ(progress[i].tensors_done, i);
    }
    EXPECT_EQ(progress.back().bytes_done, checkpoint->total_bytes());
    EXPECT_EQ(progress.back().bytes_total, checkpoint->total_bytes());
    EXPECT_EQ(progress.back().tensors_total, 4u);

    auto missing = checkpoint->load_tensors({"model.norm.weight", "a", "b"},
                                            [](const std::string&, Tensor) { return ok_status(); });
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    EXPECT_THAT(missing.error().message, HasSubstr("missing tensors: a, b"));
    auto stopped = checkpoint->load_all([](const std::string& name, Tensor) {
        return Status(fail(ErrorCode::aborted, "stop at " + name));
    });
    ASSERT_FALSE(stopped);
    EXPECT_EQ(stopped.error().code, ErrorCode::aborted);
}

TEST(Checkpoint, ShardedRoundTrip) {
    TempDir dir;
    write_config(dir);
    const auto tensors = sample_tensors();
    auto written = write_sharded_safetensors(
        dir.path(), sources(tensors), {.max_shard_bytes = 32, .metadata = {{"format", "pt"}}});
    ASSERT_TRUE(written) << written.error().to_string();
    EXPECT_TRUE(written->sharded);
    // 24 + 8 | 24 | 24: greedy in the given order.
    ASSERT_EQ(written->files.size(), 4u);
    EXPECT_EQ(written->files[0].filename(), "model-00001-of-00003.safetensors");
    EXPECT_EQ(written->files[3].filename(), "model.safetensors.index.json");
    EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
    auto index = read_json_file(dir / "model.safetensors.index.json");
    ASSERT_TRUE(index);
    EXPECT_EQ((*index)["metadata"]["total_size"], 80);
    EXPECT_EQ((*index)["weight_map"]["model.norm.weight"], "model-00001-of-00003.safetensors");
    EXPECT_EQ((*index)["weight_map"]["lm_head.weight"], "model-00003-of-00003.safetensors");

    auto checkpoint = Checkpoint::open(dir.path());
    ASSERT_TRUE(checkpoint) << checkpoint.error().to_string();
    EXPECT_TRUE((*checkpoint)->sharded());
    EXPECT_EQ((*checkpoint)->files().size(), 3u);
    EXPECT_EQ((*checkpoint)->total_bytes(), 80u);
    for (const auto& [name, tensor] : tensors) {
        EXPECT_TRUE((*checkpoint)->tensor(name)->equals(tensor)) << name;
    }
    EXPECT_EQ((*checkpoint)->files()[1]->metadata().at("format"), "pt");
}

TEST(Checkpoint, ShardedWriterUsesOneFileWhenEverythingFits) {
    TempDir dir;
    write_config(dir);
    auto written = write_sharded_safetensors(dir.path(), sources(sample_tensors()), {});
    ASSERT_TRUE(written);
    EXPECT_FALSE(written->sharded);
    EXPECT_EQ(written->files, std::vector<std::filesystem::path>{dir / "model.safetensors"});
    EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors.index.json"));
    EXPECT_TRUE(Checkpoint::open(dir.path()));
}

TEST(Checkpoint, TensorsOutliveTheCheckpoint) {
    TempDir dir;
    write_config(dir);
    ASSERT_TRUE(write_safetensors(dir / "model.safetensors", sample_tensors()));
    Tensor view;
    {
        auto checkpoint = *Checkpoint::open(dir.path());
        view = *checkpoint->tensor("lm_head.weight");
    }
    EXPECT_TRUE(view.equals(sample_tensors()[3].second));
}

class BrokenCheckpoint : public ::testing::Test {
  protected:
    // A valid two-shard checkpoint to break.
    void SetUp() override {
        write_config(dir_);
        ASSERT_TRUE(
            write_safetensors(dir_ / "a.safetensors", {{"x", Tensor::from_vector<float>({1})}}));
        ASSERT_TRUE(
            write_safetensors(dir_ / "b.safetensors", {{"y", Tensor::from_vector<float>({2})}}));
    }
    void write_index(const std::string& weight_map) {
        write_text(dir_ / "model.safetensors.index.json",
                   R"({"metadata": {}, "weight_map": )" + weight_map + "}");
    }
    Error open_error() {
        auto checkpoint = Checkpoint::open(dir_.path());
        EXPECT_FALSE(checkpoint);
        return checkpoint ? Error{} : checkpoint.error();
    }
    TempDir dir_;
};

TEST_F(BrokenCheckpoint, ValidIndexOpens) {
    write_index(R"({"x": "a.safetensors", "y": "b.safetensors"})");
    auto checkpoint = Checkpoint::open(dir_.path());
    ASSERT_TRUE(checkpoint) << checkpoint.error().to_string();
    EXPECT_EQ((*checkpoint)->tensor_count(), 2u);
}

TEST_F(BrokenCheckpoint, MissingFiles) {
    auto no_directory = Checkpoint::open(dir_ / "nope");
    ASSERT_FALSE(no_directory);
    EXPECT_EQ(no_directory.error().code, ErrorCode::not_found);
    EXPECT_THAT(no_directory.error().message, HasSubstr("no such checkpoint directory"));

    Error no_weights = open_error();
    EXPECT_EQ(no_weights.code, ErrorCode::not_found);
    EXPECT_THAT(no_weights.message, HasSubstr("neither model.safetensors nor "
                                              "model.safetensors.index.json exists"));

    std::filesystem::remove(dir_ / "config.json");
    Error no_config = open_error();
    EXPECT_EQ(no_config.code, ErrorCode::not_found);
    EXPECT_THAT(no_config.message, HasSubstr("config.json: no such file"));
}

TEST_F(BrokenCheckpoint, BadConfig) {
    write_text(dir_ / "config.json", "{oops");
    Error not_json = open_error();
    EXPECT_EQ(not_json.code, ErrorCode::data_loss);
    EXPECT_THAT(not_json.message, HasSubstr("config.json: not valid JSON"));
    write_text(dir_ / "config.json", "[1]");
    EXPECT_THAT(open_error().message, HasSubstr("must be a JSON object"));
}

TEST_F(BrokenCheckpoint, BadIndex) {
    write_text(dir_ / "model.safetensors.index.json", "nope");
    EXPECT_THAT(open_error().message, HasSubstr("not valid JSON"));
    write_text(dir_ / "model.safetensors.index.json", R"({"metadata": {}})");
    EXPECT_THAT(open_error().message, HasSubstr("\"weight_map\" object"));
    write_index(R"({"x": 3})");
    EXPECT_THAT(open_error().message, HasSubstr("weight_map[\"x\"] is not a string"));
    write_index("{}");
    EXPECT_THAT(open_error().message, HasSubstr("weight_map is empty"));
    write_index(R"({"x": "../a.safetensors"})");
    EXPECT_THAT(open_error().message, HasSubstr("not a file name inside the checkpoint directory"));
    write_index(R"({"x": "/etc/passwd"})");
    EXPECT_THAT(open_error().message, HasSubstr("not a file name inside the checkpoint directory"));
}

TEST_F(BrokenCheckpoint, WeightMapNamesAMissingShard) {
    write_index(R"({"x": "a.safetensors", "y": "c.safetensors"})");
    Error error = open_error();
    EXPECT_EQ(error.code, ErrorCode::not_found);
    EXPECT_THAT(error.message,
                HasSubstr("shard c.safetensors (named for tensor 'y') does not exist"));
}

TEST_F(BrokenCheckpoint, WeightMapNamesAMissingTensor) {
    write_index(R"({"x": "a.safetensors", "y": "b.safetensors", "z": "b.safetensors"})");
    Error error = open_error();
    EXPECT_EQ(error.code, ErrorCode::data_loss);
    EXPECT_THAT(error.message,
                HasSubstr("weight_map names tensor 'z' in b.safetensors but no shard contains it"));
    write_index(R"({"x": "b.safetensors", "y": "a.safetensors"})");
    EXPECT_THAT(open_error().message,
                HasSubstr("names tensor 'x' in b.safetensors but it is in a.safetensors"));
}

TEST_F(BrokenCheckpoint, DuplicateTensorAcrossShards) {
    ASSERT_TRUE(write_safetensors(
        dir_ / "b.safetensors",
        {{"x", Tensor::from_vector<float>({3})}, {"y", Tensor::from_vector<float>({2})}}));
    write_index(R"({"x": "a.safetensors", "y": "b.safetensors"})");
    Error error = open_error();
    EXPECT_EQ(error.code, ErrorCode::data_loss);
    EXPECT_THAT(error.message, HasSubstr("tensor 'x' is in both a.safetensors and b.safetensors"));
}

TEST_F(BrokenCheckpoint, CorruptShardNamesTheFile) {
    write_text(dir_ / "b.safetensors", "garbage!garbage!");
    write_index(R"({"x": "a.safetensors", "y": "b.safetensors"})");
    Error error = open_error();
    EXPECT_EQ(error.code, ErrorCode::data_loss);
    EXPECT_THAT(error.message, HasSubstr("b.safetensors"));
}

TEST_F(BrokenCheckpoint, SingleFileWinsOverAnIndex) {
    write_index(R"({"x": "missing.safetensors"})");
    ASSERT_TRUE(
        write_safetensors(dir_ / "model.safetensors", {{"w", Tensor::from_vector<float>({1})}}));
    auto checkpoint = Checkpoint::open(dir_.path());
    ASSERT_TRUE(checkpoint) << checkpoint.error().to_string();
    EXPECT_THAT((*checkpoint)->tensor_names(), ElementsAre("w"));
}

}  // namespace
}  // namespace omnirt::checkpoint
