#pragma once
// EncoderCache: the outputs of the Qwen3-Omni encoder stages by content, so that a media item
// seen again (a later turn of a conversation, the same image in several requests) is not encoded
// twice. Least recently used entries go first once the entries' bytes would pass the capacity.
//
// Keys are the item's 64-bit content hash (the preprocessing stage's `key`: source bytes and
// preprocessing) with the shape the encoder saw (the vision grid (t, h, w), the audio's mel
// frames), so a colliding hash of a differently shaped item never returns a wrong-sized output.
// Values are the item's output map (Value tensors share their storage: a hit copies no bytes);
// their size is the bytes of the storages their tensors hold.
//
// Thread safety: every member may be called from any thread.
#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/value.h"

namespace omnirt::models::qwen3_omni {

struct EncoderCacheKey {
    std::int64_t content = 0;
    std::array<std::int64_t, 3> shape{};  // vision (t, h, w); audio (frames, 0, 0)
    friend bool operator==(const EncoderCacheKey&, const EncoderCacheKey&) = default;
};

struct EncoderCacheKeyHash {
    [[nodiscard]] std::size_t operator()(const EncoderCacheKey& key) const;
};

// Bytes of the tensor storages `value` holds (nested lists and maps included).
[[nodiscard]] std::size_t tensor_bytes(const Value& value);

class EncoderCache {
  public:
    // capacity_bytes 0: nothing is ever kept.
    explicit EncoderCache(std::size_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

    // The output stored under `key` (now the most recently used), or nullopt.
    [[nodiscard]] std::optional<Value> find(const EncoderCacheKey& key);
    // Stores `output` under `key` (replacing an older one), evicting least recently used
    // entries until the total fits the capacity; an output larger than the capacity is not kept.
    void insert(const EncoderCacheKey& key, Value output);

    [[nodiscard]] std::size_t capacity_bytes() const { return capacity_bytes_; }
    [[nodiscard]] std::size_t bytes() const;
    [[nodiscard]] std::size_t entries() const;

  private:
    struct Entry {
        EncoderCacheKey key;
        Value output;
        std::size_t bytes = 0;
    };
    void erase_locked(std::list<Entry>::iterator entry);

    const std::size_t capacity_bytes_;
    mutable std::mutex mutex_;
    std::list<Entry> entries_;  // most recently used first
    std::unordered_map<EncoderCacheKey, std::list<Entry>::iterator, EncoderCacheKeyHash> index_;
    std::size_t bytes_ = 0;
};

}  // namespace omnirt::models::qwen3_omni
