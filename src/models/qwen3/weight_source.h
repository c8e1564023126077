#pragma once
// Where a Qwen3 stage takes its weights from, and the progress of taking them.
//
//   load_format auto   the Hugging Face checkpoint in the directory (config.json + safetensors),
//                      tensors as zero-copy views of the mapped files
//   load_format dummy  only config.json is read; every tensor the model needs is generated at its
//                      real size with seeded random values (checkpoint/dummy.h: norm weights
//                      around 1, the rest around 0 with std 0.02), in the dtype asked for. The
//                      same seed gives the same values on every machine. For benchmarks at real
//                      sizes without the weights.
//
// tensor() counts what it hands out against the tensors the model will ask for (tensor_specs():
// every expected tensor except a tied lm_head). The first call reports zero done; a tensor is
// reported done when the next one is asked for, or at finish(), so that what is shown is what
// the caller has finished converting (a view of a mapped file costs nothing until converted).
//
// Thread safety: open() may run on any thread; tensor() and finish() from one thread at a time.
// Tensors handed out stay valid after the WeightSource is gone (mapped files stay mapped).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "checkpoint/checkpoint.h"
#include "checkpoint/dummy.h"
#include "checkpoint/progress.h"
#include "core/tensor.h"
#include "models/qwen3/config.h"

namespace omnirt::models::qwen3 {

enum class LoadFormat : std::uint8_t { automatic, dummy };

// "auto" (also "safetensors") or "dummy"; invalid_argument naming the accepted values otherwise.
[[nodiscard]] Result<LoadFormat> parse_load_format(std::string_view name);

struct WeightSourceOptions {
    LoadFormat format = LoadFormat::automatic;
    DType dummy_dtype = DType::bf16;  // dummy tensors are made in this dtype (the model's)
    checkpoint::DummyInit dummy_init;
    checkpoint::ProgressCallback progress;  // may be empty
    // Where the text config sits in config.json, as a JSON pointer ("/thinker_config/text_config"
    // for Qwen3-Omni's thinker); empty: the whole file.
    std::string config_pointer;
    // Put before every tensor name (dummy specs and the expected tensors): "thinker.".
    std::string prefix;
};

class WeightSource {
  public:
    // Reads config.json (and, for auto, opens the checkpoint's weights). Errors: the checkpoint's
    // (not_found naming what is missing, data_loss for malformed files) and the config's
    // (invalid_argument naming the key, prefixed with config.json's path).
    [[nodiscard]] static Result<std::unique_ptr<WeightSource>> open(
        const std::filesystem::path& directory, WeightSourceOptions options);

    [[nodiscard]] const Qwen3Config& config() const { return config_; }
    [[nodiscard]] LoadFormat format() const { return options_.format; }
    // What the model will ask for: tensors and their bytes (as stored, before any conversion).
    [[nodiscard]] std::size_t tensors_total() const { return expected_bytes_.size(); }
    [[nodiscard]] std::uint64_t bytes_total() const { return bytes_total_; }

    // The named tensor: a view of the checkpoint, or a new dummy tensor. not_found for a name
    // the checkpoint lacks (auto) or the model does not have (dummy).
    [[nodiscard]] Result<Tensor> tensor(const std::string& name);
    // Reports the last tensor and the end (tensors_done == tensors_total). Idempotent.
    void finish();

  private:
    WeightSource(Qwen3Config config, WeightSourceOptions options,
                 std::unique_ptr<checkpoint::Checkpoint> checkpoint);
    void complete_pending();

    Qwen3Config config_;
    WeightSourceOptions options_;
    std::unique_ptr<checkpoint::Checkpoint> checkpoint_;  // auto only
    std::map<std::string, checkpoint::TensorSpec, std::less<>> specs_;
    std::map<std::string, std::uint64_t, std::less<>> expected_bytes_;
    std::uint64_t bytes_total_ = 0;
    checkpoint::Progress progress_;
    std::set<std::string, std::less<>> counted_;
    std::optional<std::string> pending_;  // handed out last, not yet reported done
    bool started_ = false;
    bool finished_ = false;
};

}  // namespace omnirt::models::qwen3
