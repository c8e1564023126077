#include "models/qwen3_omni/encoder_cache.h"

#include <functional>
#include <set>
#include <utility>

namespace omnirt::models::qwen3_omni {
namespace {

void collect_storages(const Value& value, std::set<const Storage*>& storages, std::size_t& bytes) {
    if (const Tensor* tensor = value.if_tensor()) {
        if (tensor->defined() && storages.insert(tensor->storage().get()).second) {
            bytes += tensor->storage()->nbytes();
        }
    } else if (const List* list = value.if_list()) {
        for (const Value& element : *list) collect_storages(element, storages, bytes);
    } else if (const Map* map = value.if_map()) {
        for (const auto& [key, element] : *map) collect_storages(element, storages, bytes);
    }
}

}  // namespace

std::size_t EncoderCacheKeyHash::operator()(const EncoderCacheKey& key) const {
    std::size_t hash = std::hash<std::int64_t>{}(key.content);
    for (std::int64_t size : key.shape) {
        hash ^= std::hash<std::int64_t>{}(size) + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
    }
    return hash;
}

std::size_t tensor_bytes(const Value& value) {
    std::set<const Storage*> storages;
    std::size_t bytes = 0;
    collect_storages(value, storages, bytes);
    return bytes;
}

std::optional<Value> EncoderCache::find(const EncoderCacheKey& key) {
    std::lock_guard lock(mutex_);
    auto found = index_.find(key);
    if (found == index_.end()) return std::nullopt;
    entries_.splice(entries_.begin(), entries_, found->second);
    return found->second->output;
}

void EncoderCache::insert(const EncoderCacheKey& key, Value output) {
    const std::size_t bytes = tensor_bytes(output);
    std::lock_guard lock(mutex_);
    if (auto found = index_.find(key); found != index_.end()) erase_locked(found->second);
    if (bytes > capacity_bytes_ || capacity_bytes_ == 0) return;
    while (bytes_ + bytes > capacity_bytes_) erase_locked(std::prev(entries_.end()));
    entries_.push_front(Entry{.key = key, .output = std::move(output), .bytes = bytes});
    index_.emplace(key, entries_.begin());
    bytes_ += bytes;
}

std::size_t EncoderCache::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

std::size_t EncoderCache::entries() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

void EncoderCache::erase_locked(std::list<Entry>::iterator entry) {
    bytes_ -= entry->bytes;
    index_.erase(entry->key);
    entries_.erase(entry);
}

}  // namespace omnirt::models::qwen3_omni
