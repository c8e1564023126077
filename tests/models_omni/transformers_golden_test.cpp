// The encoders against transformers 5.17's Qwen3OmniMoeAudioEncoder / Qwen3OmniMoeVisionEncoder
// run in float32 on the CPU at the tiny sizes of encoder_test_support.h with random weights:
// golden/weights.safetensors (checkpoint names) and golden/io.safetensors (inputs, outputs), made
// by golden/make_encoder_golden.py.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/safetensors.h"
#include "models_omni/encoder_test_support.h"

namespace omnirt::models::qwen3_omni {
namespace {

using testing::expect_close;

const std::filesystem::path kGolden =
    std::filesystem::path(OMNIRT_SOURCE_DIR) / "tests" / "models_omni" / "golden";

std::unique_ptr<checkpoint::SafetensorsFile> open_file(const std::string& name) {
    auto file = checkpoint::SafetensorsFile::open(kGolden / name);
    OMNI_CHECK(file.has_value(), file.has_value() ? "" : file.error().to_string());
    return std::move(*file);
}

class TransformersGolden : public ::testing::Test {
  protected:
    at::Tensor io(const std::string& name) const {
        auto tensor = io_->tensor(name);
        OMNI_CHECK(tensor.has_value(), name.c_str());
        return torch_bridge::to_torch(*tensor);
    }
    WeightLookup lookup() const {
        return [this](const std::string& name) { return weights_->tensor(name); };
    }

    std::unique_ptr<checkpoint::SafetensorsFile> weights_ = open_file("weights.safetensors");
    std::unique_ptr<checkpoint::SafetensorsFile> io_ = open_file("io.safetensors");
};

TEST_F(TransformersGolden, AudioEncoder) {
    auto encoder = AudioEncoder::load(testing::tiny_audio_config(), lookup());
    ASSERT_TRUE(encoder.has_value()) << encoder.error().to_string();
    const std::vector<at::Tensor> mels = {io("mel_0"), io("mel_1"), io("mel_2")};
    auto out = (*encoder)->forward(mels);
    ASSERT_TRUE(out.has_value()) << out.error().to_string();
    // transformers returns the audios' rows concatenated: 5 + 14 + 33.
    expect_close(at::cat(*out), io("audio_batch"), 1e-4);
    // Alone, transformers does not pad the 37-frame chunk: longest_in_batch reproduces it.
    auto exact = AudioEncoder::load(testing::tiny_audio_config(), lookup(),
                                    {.chunk_padding = AudioChunkPadding::longest_in_batch});
    ASSERT_TRUE(exact.has_value());
    auto alone = (*exact)->forward({mels[0]});
    ASSERT_TRUE(alone.has_value());
    expect_close((*alone)[0], io("audio_alone_37"), 1e-4);
}

TEST_F(TransformersGolden, VisionEncoder) {
    auto encoder = VisionEncoder::load(testing::tiny_vision_config(), lookup());
    ASSERT_TRUE(encoder.has_value()) << encoder.error().to_string();
    auto out = (*encoder)->forward(io("pixels"), {{1, 4, 6}, {2, 2, 2}});
    ASSERT_TRUE(out.has_value()) << out.error().to_string();
    ASSERT_EQ(out->size(), 2u);
    expect_close(at::cat({(*out)[0].embeddings, (*out)[1].embeddings}), io("vision_embeddings"),
                 1e-4);
    for (std::size_t k = 0; k < 2; ++k) {
        expect_close(at::cat({(*out)[0].deepstack[k], (*out)[1].deepstack[k]}),
                     io("vision_deepstack_" + std::to_string(k)), 1e-4);
    }
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni
