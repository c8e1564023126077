#pragma once
// Paged K/V storage of an AR model: per layer one key and one value tensor of shape
// [num_blocks, block_size, num_kv_heads, head_dim] (dtype and kv heads from the KVCacheSpec;
// num_kv_heads is per tensor-parallel rank). Position p of a sequence lives in block
// block_table[p / block_size], slot p % block_size. The engine owns the block ids (block
// allocator, radix prefix cache); the model runner writes and reads the slots named by the block
// tables it is given (model_runner.h).
//
// Thread safety: not thread-safe. The engine thread that drives the runner owns the cache;
// copy_block() must not run concurrently with a forward().
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/error.h"
#include "engine/model_runner.h"

namespace omnirt::engine {

class KVCache {
  public:
    // [num_blocks, block_size, num_kv_heads, head_dim] K and V tensors per layer, zero-filled.
    // invalid_argument for a spec or sizes that are not positive; resource_exhausted when the
    // memory cannot be allocated.
    [[nodiscard]] static Result<std::unique_ptr<KVCache>> create(const KVCacheSpec& spec,
                                                                 std::int64_t num_blocks,
                                                                 std::int64_t block_size,
                                                                 at::Device device = at::kCPU);
    // Bytes one block takes over all layers, keys and values together (what a memory budget is
    // divided by to size num_blocks).
    [[nodiscard]] static std::int64_t bytes_per_block(const KVCacheSpec& spec,
                                                      std::int64_t block_size);

    KVCache(const KVCache&) = delete;
    KVCache& operator=(const KVCache&) = delete;

    [[nodiscard]] const KVCacheSpec& spec() const { return spec_; }
    [[nodiscard]] std::int64_t num_blocks() const { return num_blocks_; }
    [[nodiscard]] std::int64_t block_size() const { return block_size_; }
    [[nodiscard]] at::Device device() const { return device_; }

    // The layer's tensors (0 <= layer < spec().num_layers; aborts otherwise).
    [[nodiscard]] at::Tensor& keys(int layer);
    [[nodiscard]] at::Tensor& values(int layer);

    // Copies block `from` to block `to` in every layer (copy-on-write of a shared prefix block).
    // Both ids must be in [0, num_blocks) (aborts otherwise); from == to does nothing.
    void copy_block(std::int32_t from, std::int32_t to);

  private:
    KVCache(const KVCacheSpec& spec, std::int64_t num_blocks, std::int64_t block_size,
            at::Device device);

    KVCacheSpec spec_;
    std::int64_t num_blocks_;
    std::int64_t block_size_;
    at::Device device_;
    std::vector<at::Tensor> keys_;
    std::vector<at::Tensor> values_;
};

}  // namespace omnirt::engine
