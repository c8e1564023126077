#include "engine/kv_cache.h"

#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <limits>
#include <string>

namespace omnirt::engine {

std::int64_t KVCache::bytes_per_block(const KVCacheSpec& spec, std::int64_t block_size) {
    const std::int64_t element_bytes = static_cast<std::int64_t>(c10::elementSize(spec.dtype));
    // Keys and values of every layer.
    return 2 * static_cast<std::int64_t>(spec.num_layers) * block_size * spec.num_kv_heads *
           spec.head_dim * element_bytes;
}

Result<std::unique_ptr<KVCache>> KVCache::create(const KVCacheSpec& spec, std::int64_t num_blocks,
                                                 std::int64_t block_size, at::Device device) {
    if (spec.num_layers <= 0 || spec.num_kv_heads <= 0 || spec.head_dim <= 0) {
        return fail(ErrorCode::invalid_argument,
                    "KV cache spec needs positive num_layers, num_kv_heads and head_dim (got " +
                        std::to_string(spec.num_layers) + ", " + std::to_string(spec.num_kv_heads) +
                        ", " + std::to_string(spec.head_dim) + ")");
    }
    if (num_blocks <= 0 || block_size <= 0) {
        return fail(ErrorCode::invalid_argument,
                    "KV cache needs positive num_blocks and block_size (got " +
                        std::to_string(num_blocks) + ", " + std::to_string(block_size) + ")");
    }
    if (num_blocks > std::numeric_limits<std::int32_t>::max()) {
        return fail(ErrorCode::out_of_range, "KV cache num_blocks " + std::to_string(num_blocks) +
                                                 " does not fit the int32 block ids");
    }
    std::unique_ptr<KVCache> cache(new KVCache(spec, num_blocks, block_size, device));
    const auto options = at::TensorOptions().dtype(spec.dtype).device(device);
    try {
        for (int layer = 0; layer < spec.num_layers; ++layer) {
            cache->keys_.push_back(
                at::zeros({num_blocks, block_size, spec.num_kv_heads, spec.head_dim}, options));
            cache->values_.push_back(
                at::zeros({num_blocks, block_size, spec.num_kv_heads, spec.head_dim}, options));
        }
    } catch (const c10::Error& error) {
        return fail(ErrorCode::resource_exhausted,
                    "cannot allocate the KV cache (" + std::to_string(num_blocks) + " blocks of " +
                        std::to_string(bytes_per_block(spec, block_size)) + " bytes on " +
                        device.str() + "): " + error.what_without_backtrace());
    }
    return cache;
}

KVCache::KVCache(const KVCacheSpec& spec, std::int64_t num_blocks, std::int64_t block_size,
                 at::Device device)
    : spec_(spec), num_blocks_(num_blocks), block_size_(block_size), device_(device) {
    keys_.reserve(static_cast<std::size_t>(spec.num_layers));
    values_.reserve(static_cast<std::size_t>(spec.num_layers));
}

at::Tensor& KVCache::keys(int layer) {
    OMNI_CHECK(layer >= 0 && layer < spec_.num_layers, "KVCache::keys: layer out of range");
    return keys_[static_cast<std::size_t>(layer)];
}

at::Tensor& KVCache::values(int layer) {
    OMNI_CHECK(layer >= 0 && layer < spec_.num_layers, "KVCache::values: layer out of range");
    return values_[static_cast<std::size_t>(layer)];
}

void KVCache::copy_block(std::int32_t from, std::int32_t to) {
    OMNI_CHECK(from >= 0 && from < num_blocks_ && to >= 0 && to < num_blocks_,
               "KVCache::copy_block: block id out of range");
    if (from == to) return;
    for (std::size_t layer = 0; layer < keys_.size(); ++layer) {
        keys_[layer][to].copy_(keys_[layer][from]);
        values_[layer][to].copy_(values_[layer][from]);
    }
}

}  // namespace omnirt::engine
