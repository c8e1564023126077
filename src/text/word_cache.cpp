// The sharded LRU word cache.
#include "text/word_cache.h"

#include <functional>

namespace omnirt::text::detail {

WordCache::WordCache(std::size_t capacity)
    : shard_capacity_(capacity == 0 ? 0 : (capacity + kShards - 1) / kShards) {}

bool WordCache::lookup(std::string_view word, std::vector<TokenId>& out) const {
    if (shard_capacity_ == 0) return false;
    Shard& shard = shard_for(std::hash<std::string_view>{}(word));
    std::lock_guard lock(shard.mutex);
    const auto found = shard.index.find(word);
    if (found == shard.index.end()) return false;
    shard.entries.splice(shard.entries.begin(), shard.entries, found->second);
    const std::vector<TokenId>& ids = found->second->ids;
    out.insert(out.end(), ids.begin(), ids.end());
    return true;
}

void WordCache::insert(std::string_view word, std::span<const TokenId> ids) const {
    if (shard_capacity_ == 0) return;
    Shard& shard = shard_for(std::hash<std::string_view>{}(word));
    std::lock_guard lock(shard.mutex);
    if (shard.index.contains(word)) return;  // another thread stored it first
    if (shard.entries.size() >= shard_capacity_) {
        shard.index.erase(shard.entries.back().word);
        shard.entries.pop_back();
    }
    shard.entries.push_front(
        Entry{std::string(word), std::vector<TokenId>(ids.begin(), ids.end())});
    shard.index.emplace(shard.entries.front().word, shard.entries.begin());
}

}  // namespace omnirt::text::detail
