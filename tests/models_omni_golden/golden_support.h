#pragma once
// Shared by the Qwen3-Omni golden tests: the tiny checkpoint the goldens were made from
// (regenerated: seed 7, init std 0.1) and the transformers goldens file.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/test_support.h"
#include "engine/kv_cache.h"
#include "models/qwen3/qwen3_weights.h"
#include "models/qwen3_omni/make_checkpoint.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {

struct Tiny {
    checkpoint::testing::TempDir directory;
    std::unique_ptr<checkpoint::Checkpoint> checkpoint;
    OmniConfig config;
};

inline std::unique_ptr<Tiny> make_tiny() {
    auto tiny = std::make_unique<Tiny>();
    auto made =
        make_checkpoint(tiny->directory.path(),
                        {.preset = "tiny", .seed = 7, .dtype = DType::bf16, .init_std = 0.1});
    OMNI_CHECK(made.has_value(), made.has_value() ? "" : made.error().to_string().c_str());
    auto opened = checkpoint::Checkpoint::open(tiny->directory.path());
    OMNI_CHECK(opened.has_value(), "open");
    tiny->checkpoint = std::move(*opened);
    tiny->config = made->config;
    return tiny;
}

inline qwen3::WeightLookup lookup_of(const checkpoint::Checkpoint& checkpoint) {
    return [&checkpoint](const std::string& name) { return checkpoint.tensor(name); };
}

inline std::unique_ptr<engine::KVCache> make_cache(const engine::ModelRunner& model) {
    auto cache = engine::KVCache::create(model.kv_spec(), 64, 8);
    OMNI_CHECK(cache.has_value(), "cache");
    return std::move(*cache);
}

inline std::vector<std::int32_t> blocks() {
    std::vector<std::int32_t> out(64);
    for (std::int32_t i = 0; i < 64; ++i) out[i] = i;
    return out;
}

class Golden {
  public:
    static std::unique_ptr<Golden> open() {
        const auto path = std::filesystem::path(OMNIRT_SOURCE_DIR) /
                          "tests/goldens/hf/qwen3_omni_tiny.safetensors";
        if (!std::filesystem::exists(path)) return nullptr;
        auto file = checkpoint::SafetensorsFile::open(path);
        OMNI_CHECK(file.has_value(), "golden file");
        auto golden = std::make_unique<Golden>();
        golden->file_ = std::move(*file);
        return golden;
    }
    bool has(const std::string& name) const { return file_->tensor(name).has_value(); }
    at::Tensor get(const std::string& name) const {
        auto tensor = file_->tensor(name);
        OMNI_CHECK(tensor.has_value(), ("golden tensor " + name).c_str());
        return torch_bridge::to_torch(*tensor).clone();
    }
    // The first of `names` the file holds.
    at::Tensor first(std::initializer_list<std::string> names) const {
        for (const std::string& name : names) {
            if (has(name)) return get(name);
        }
        return {};
    }

  private:
    std::unique_ptr<checkpoint::SafetensorsFile> file_;
};

}  // namespace omnirt::models::qwen3_omni
