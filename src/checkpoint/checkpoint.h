#pragma once
// Checkpoint: a Hugging Face model directory read in place.
//
//   config.json                                  (required; any JSON object)
//   model.safetensors                            (one file), or
//   model.safetensors.index.json + its shards    ({"weight_map": {tensor: file}})
//
// As in transformers, model.safetensors wins when both layouts are present. Every shard is mapped
// and its header validated at open(); tensor bytes are read lazily through the mapping.
//
// Errors: a missing config.json / weights file / shard is `not_found` (the message says what was
// looked for, and which tensor named a missing shard); a malformed file, a weight_map naming a
// tensor its shard lacks, or a tensor name in two shards is `data_loss`.
//
// Thread safety: immutable after open(); every method may be called from any thread. Tensors
// returned by tensor() keep their file mapped, so they may outlive the Checkpoint.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/progress.h"
#include "checkpoint/safetensors.h"

namespace omnirt::checkpoint {

inline constexpr std::string_view kConfigFile = "config.json";
inline constexpr std::string_view kSingleWeightsFile = "model.safetensors";
inline constexpr std::string_view kWeightsIndexFile = "model.safetensors.index.json";

struct TensorInfo {
    std::string name;
    DType dtype = DType::f32;
    Shape shape;
    std::uint64_t nbytes = 0;
    std::filesystem::path file;  // the shard holding it
};

struct LoadOptions {
    // Floating tensors (f16 / bf16 / f32) of another dtype are converted to this one, into new
    // owned tensors; integer and bool tensors, and tensors already of this dtype, come as
    // zero-copy read-only views. nullopt: every tensor is a view.
    std::optional<DType> dtype;
    ProgressCallback progress;  // see terminal_progress()
};

// Called once per tensor; an error stops the load and is returned.
using TensorVisitor = std::function<Status(const std::string& name, Tensor tensor)>;

class Checkpoint {
  public:
    [[nodiscard]] static Result<std::unique_ptr<Checkpoint>> open(
        const std::filesystem::path& directory);

    [[nodiscard]] const std::filesystem::path& directory() const { return directory_; }
    [[nodiscard]] const nlohmann::json& config() const { return config_; }
    // The weights files: one, or the shards in index order.
    [[nodiscard]] const std::vector<std::unique_ptr<SafetensorsFile>>& files() const {
        return files_;
    }
    [[nodiscard]] bool sharded() const { return sharded_; }

    // Sorted by name.
    [[nodiscard]] std::vector<std::string> tensor_names() const;
    [[nodiscard]] std::size_t tensor_count() const { return index_.size(); }
    // Bytes of all tensors (what loading reads).
    [[nodiscard]] std::uint64_t total_bytes() const { return total_bytes_; }
    [[nodiscard]] bool contains(std::string_view name) const { return index_.contains(name); }
    // nullptr when absent.
    [[nodiscard]] const TensorEntry* find(std::string_view name) const;
    [[nodiscard]] Result<TensorInfo> info(std::string_view name) const;

    // Zero-copy read-only view (not_found for an unknown name).
    [[nodiscard]] Result<Tensor> tensor(std::string_view name) const;
    // A new owned contiguous tensor converted to `target` (see convert_dtype()).
    [[nodiscard]] Result<Tensor> load_tensor(std::string_view name, DType target) const;

    // Visits the named tensors in file order (sequential reads), reporting progress; not_found
    // (listing up to ten names) when any is absent, before visiting anything.
    [[nodiscard]] Status load_tensors(const std::vector<std::string>& names,
                                      const TensorVisitor& visit,
                                      const LoadOptions& options = {}) const;
    // Every tensor of the checkpoint.
    [[nodiscard]] Status load_all(const TensorVisitor& visit,
                                  const LoadOptions& options = {}) const;

  private:
    struct Location {
        const SafetensorsFile* file;
        const TensorEntry* entry;
        std::size_t file_index;
    };

    Checkpoint() = default;
    Status add_file(std::unique_ptr<SafetensorsFile> file);
    Result<const Location*> locate(std::string_view name) const;

    std::filesystem::path directory_;
    nlohmann::json config_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::map<std::string, Location, std::less<>> index_;
    std::uint64_t total_bytes_ = 0;
    bool sharded_ = false;
};

// Reads and parses a JSON file of at most `max_bytes` (errors name the file; not_found when it
// does not exist, data_loss when it is not JSON).
[[nodiscard]] Result<nlohmann::json> read_json_file(const std::filesystem::path& path,
                                                    std::uint64_t max_bytes = 64u << 20);

}  // namespace omnirt::checkpoint
