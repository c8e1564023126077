#include "models/s2_pro/reference_cache.h"

#include <cstring>

namespace omnirt::models::s2_pro {
namespace {

std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace

ReferenceCache::Key ReferenceCache::key_of(std::span<const float> samples) {
    // FNV-1a over the bits, and a multiply-xorshift chain with another seed: independent enough
    // that both colliding at once is out of reach.
    std::uint64_t fnv = 0xCBF29CE484222325ull;
    std::uint64_t chain = 0x9E3779B97F4A7C15ull;
    for (const float sample : samples) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &sample, sizeof bits);
        fnv = (fnv ^ bits) * 0x100000001B3ull;
        chain = mix(chain + bits);
    }
    return Key{.first = fnv, .second = chain, .samples = samples.size()};
}

std::optional<CodeMatrix> ReferenceCache::find(const Key& key) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
        ++misses_;
        return std::nullopt;
    }
    ++hits_;
    order_.splice(order_.begin(), order_, it->second.second);
    return it->second.first;
}

void ReferenceCache::insert(const Key& key, CodeMatrix codes) {
    if (capacity_ == 0) return;
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
        it->second.first = std::move(codes);
        order_.splice(order_.begin(), order_, it->second.second);
        return;
    }
    while (entries_.size() >= capacity_) {
        entries_.erase(order_.back());
        order_.pop_back();
    }
    order_.push_front(key);
    entries_.emplace(key, std::make_pair(std::move(codes), order_.begin()));
}

std::size_t ReferenceCache::size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

std::uint64_t ReferenceCache::hits() const {
    std::lock_guard lock(mutex_);
    return hits_;
}

std::uint64_t ReferenceCache::misses() const {
    std::lock_guard lock(mutex_);
    return misses_;
}

}  // namespace omnirt::models::s2_pro
