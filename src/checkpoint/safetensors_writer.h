#pragma once
// Writing safetensors files, one tensor at a time so that memory stays bounded whatever the
// checkpoint's size. Layout as the reference implementation writes it: tensors ordered by element
// size (largest first) then name, so each starts at a multiple of its element size; the header
// padded with spaces so the data section starts at a multiple of 8.
//
// Files are written under a temporary name and renamed when complete: a failed write leaves no
// partial file behind.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/progress.h"
#include "core/tensor.h"

namespace omnirt::checkpoint {

// One tensor to write. Its bytes come from `tensor` (a host tensor of this dtype and shape) or,
// when that is undefined, from `fill`, called with consecutive chunks covering the tensor's
// row-major bytes in order: fill(offset, chunk) writes bytes [offset, offset + chunk.size()).
struct TensorSource {
    std::string name;
    DType dtype = DType::f32;
    Shape shape;
    Tensor tensor;
    std::function<Status(std::uint64_t offset, std::span<std::byte> chunk)> fill;

    [[nodiscard]] std::uint64_t nbytes() const;
};

// A source backed by an in-memory tensor.
[[nodiscard]] TensorSource tensor_source(std::string name, Tensor tensor);

struct WriteOptions {
    std::map<std::string, std::string> metadata;  // "__metadata__", e.g. {"format": "pt"}
    ProgressCallback progress;
};

// Writes one safetensors file. Names must be unique, non-empty and not "__metadata__".
[[nodiscard]] Status write_safetensors(const std::filesystem::path& path,
                                       const std::vector<TensorSource>& tensors,
                                       const WriteOptions& options = {});
[[nodiscard]] Status write_safetensors(const std::filesystem::path& path,
                                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                                       const WriteOptions& options = {});

inline constexpr std::uint64_t kDefaultMaxShardBytes = 2ull << 30;  // 2 GiB

struct ShardedWriteOptions {
    // A new shard starts when the next tensor would take the current one past this size (a
    // tensor larger than it gets a shard of its own).
    std::uint64_t max_shard_bytes = kDefaultMaxShardBytes;
    std::string base_name = "model";  // model.safetensors / model-00001-of-00002.safetensors
    std::map<std::string, std::string> metadata;  // written into every shard
    ProgressCallback progress;                    // over all shards
};

struct WrittenFiles {
    std::vector<std::filesystem::path> files;  // the shards (or the one file), then the index
    std::uint64_t tensor_bytes = 0;
    std::size_t tensor_count = 0;
    bool sharded = false;
};

// Writes `tensors` into `directory` (which must exist) as Hugging Face does: one
// `<base>.safetensors` when everything fits one shard, otherwise
// `<base>-0000i-of-0000n.safetensors` plus `<base>.safetensors.index.json` ({"metadata":
// {"total_size"}, "weight_map"}). Shards are filled greedily in the given order.
[[nodiscard]] Result<WrittenFiles> write_sharded_safetensors(
    const std::filesystem::path& directory, const std::vector<TensorSource>& tensors,
    const ShardedWriteOptions& options = {});

}  // namespace omnirt::checkpoint
