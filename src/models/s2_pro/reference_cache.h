#pragma once
// Encoded reference clips by content (the s2_pro.preprocess stage): a voice sent with many
// requests is encoded by the codec once. The key is two independent 64-bit hashes of the 44.1 kHz
// mono samples the encoder would see (and their count), so equal clips hit whatever their file
// format or source, and a false hit needs a 128-bit collision. Least recently used entries go
// first; capacity 0 disables the cache.
//
// Thread safety: every member may be called from any thread (one mutex).
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <utility>

#include "models/s2_pro/prompt.h"

namespace omnirt::models::s2_pro {

class ReferenceCache {
  public:
    struct Key {
        std::uint64_t first = 0;
        std::uint64_t second = 0;
        std::uint64_t samples = 0;
        friend auto operator<=>(const Key&, const Key&) = default;
    };

    explicit ReferenceCache(std::size_t capacity) : capacity_(capacity) {}

    [[nodiscard]] static Key key_of(std::span<const float> samples);
    [[nodiscard]] std::optional<CodeMatrix> find(const Key& key);
    void insert(const Key& key, CodeMatrix codes);

    [[nodiscard]] std::size_t size() const;
    [[nodiscard]] std::uint64_t hits() const;
    [[nodiscard]] std::uint64_t misses() const;

  private:
    using Order = std::list<Key>;  // most recently used first
    std::size_t capacity_;
    mutable std::mutex mutex_;
    Order order_;
    std::map<Key, std::pair<CodeMatrix, Order::iterator>> entries_;
    std::uint64_t hits_ = 0;
    std::uint64_t misses_ = 0;
};

}  // namespace omnirt::models::s2_pro
