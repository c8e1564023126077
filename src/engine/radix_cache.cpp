#include "engine/radix_cache.h"

#include <algorithm>
#include <queue>
#include <utility>

namespace omnirt::engine {

struct RadixCache::Node {
    Key key;  // block_size position keys; empty for roots
    BlockId block = -1;
    Node* parent = nullptr;
    std::map<Key, std::unique_ptr<Node>> children;
    std::uint64_t last_use = 0;
    std::string salt;  // roots only
};

RadixCache::RadixCache(BlockAllocator& allocator, std::int32_t block_size)
    : allocator_(allocator), block_size_(block_size) {
    OMNI_CHECK(block_size > 0, "RadixCache: block_size must be positive");
}

RadixCache::~RadixCache() { clear(); }

RadixCache::Node& RadixCache::root(const std::string& salt) {
    auto it = roots_.find(salt);
    if (it == roots_.end()) {
        auto node = std::make_unique<Node>();
        node->salt = salt;
        it = roots_.emplace(salt, std::move(node)).first;
    }
    return *it->second;
}

std::vector<BlockId> RadixCache::match(const std::string& salt,
                                       std::span<const std::int32_t> tokens) {
    const std::vector<PositionKey> keys(tokens.begin(), tokens.end());
    return match(salt, std::span<const PositionKey>(keys));
}

std::size_t RadixCache::insert(const std::string& salt, std::span<const std::int32_t> tokens,
                               std::span<BlockId> blocks) {
    const std::vector<PositionKey> keys(tokens.begin(), tokens.end());
    return insert(salt, std::span<const PositionKey>(keys), blocks);
}

std::vector<BlockId> RadixCache::match(const std::string& salt,
                                       std::span<const PositionKey> tokens) {
    ++counters_.match_calls;
    std::vector<BlockId> blocks;
    auto root_it = roots_.find(salt);
    if (root_it == roots_.end()) return blocks;
    Node* node = root_it->second.get();
    const auto block_size = static_cast<std::size_t>(block_size_);
    Key key(block_size);
    for (std::size_t start = 0; start + block_size <= tokens.size(); start += block_size) {
        std::copy_n(tokens.begin() + static_cast<std::ptrdiff_t>(start), block_size, key.begin());
        auto child = node->children.find(key);
        if (child == node->children.end()) break;
        node = child->second.get();
        allocator_.retain(node->block);
        blocks.push_back(node->block);
    }
    // One stamp for the whole path: a parent is never older than its children.
    const std::uint64_t stamp = ++clock_;
    for (Node* up = node; up != nullptr && up->parent != nullptr; up = up->parent) {
        up->last_use = stamp;
    }
    counters_.matched_blocks += blocks.size();
    return blocks;
}

std::size_t RadixCache::insert(const std::string& salt, std::span<const PositionKey> tokens,
                               std::span<BlockId> blocks) {
    const auto block_size = static_cast<std::size_t>(block_size_);
    OMNI_CHECK(tokens.size() >= blocks.size() * block_size,
               "RadixCache::insert: fewer tokens than the blocks cover");
    Node* node = &root(salt);
    const std::uint64_t stamp = ++clock_;
    std::size_t created = 0;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        Key key(tokens.begin() + static_cast<std::ptrdiff_t>(i * block_size),
                tokens.begin() + static_cast<std::ptrdiff_t>((i + 1) * block_size));
        auto child = node->children.find(key);
        if (child != node->children.end()) {
            Node& cached = *child->second;
            if (cached.block != blocks[i]) {
                allocator_.retain(cached.block);
                allocator_.release(blocks[i]);
                blocks[i] = cached.block;
                ++counters_.deduplicated_blocks;
            }
            node = &cached;
        } else {
            auto fresh = std::make_unique<Node>();
            fresh->key = std::move(key);
            fresh->block = blocks[i];
            fresh->parent = node;
            allocator_.retain(blocks[i]);
            if (node->parent != nullptr && node->children.empty()) leaves_.erase(node);
            Node* raw = fresh.get();
            node->children.emplace(raw->key, std::move(fresh));
            leaves_.insert(raw);
            ++node_count_;
            ++created;
            node = raw;
        }
        node->last_use = stamp;
    }
    counters_.inserted_blocks += created;
    return created;
}

RadixCache::Node* RadixCache::remove_leaf(Node& node) {
    OMNI_CHECK(node.children.empty() && node.parent != nullptr,
               "RadixCache: removing a node that is not a leaf");
    Node* parent = node.parent;
    leaves_.erase(&node);
    allocator_.release(node.block);
    --node_count_;
    ++counters_.evicted_blocks;
    parent->children.erase(parent->children.find(node.key));  // destroys `node`
    if (!parent->children.empty()) return nullptr;
    if (parent->parent != nullptr) {
        leaves_.insert(parent);
        return parent;
    }
    if (!parent->salt.empty()) {
        const std::string salt = parent->salt;
        roots_.erase(salt);  // an empty salted root; destroys `parent`
    }
    return nullptr;
}

std::size_t RadixCache::evict(std::size_t count) {
    if (count == 0) return 0;
    using Entry = std::pair<std::uint64_t, Node*>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> candidates;
    for (Node* leaf : leaves_) {
        if (allocator_.ref_count(leaf->block) == 1) candidates.emplace(leaf->last_use, leaf);
    }
    std::size_t freed = 0;
    while (freed < count && !candidates.empty()) {
        Node* node = candidates.top().second;
        candidates.pop();
        Node* new_leaf = remove_leaf(*node);
        ++freed;
        if (new_leaf != nullptr && allocator_.ref_count(new_leaf->block) == 1) {
            candidates.emplace(new_leaf->last_use, new_leaf);
        }
    }
    return freed;
}

void RadixCache::clear() {
    std::vector<std::unique_ptr<Node>> pending;
    for (auto& [salt, node] : roots_) pending.push_back(std::move(node));
    roots_.clear();
    // Iterative, so a long chain of blocks does not recurse once per node.
    while (!pending.empty()) {
        std::unique_ptr<Node> node = std::move(pending.back());
        pending.pop_back();
        for (auto& [key, child] : node->children) pending.push_back(std::move(child));
        if (node->parent != nullptr) allocator_.release(node->block);
    }
    leaves_.clear();
    node_count_ = 0;
}

std::size_t RadixCache::evictable_blocks() const {
    std::size_t count = 0;
    std::vector<const Node*> pending;
    for (const auto& [salt, node] : roots_) pending.push_back(node.get());
    while (!pending.empty()) {
        const Node* node = pending.back();
        pending.pop_back();
        if (node->parent != nullptr && allocator_.ref_count(node->block) == 1) ++count;
        for (const auto& [key, child] : node->children) pending.push_back(child.get());
    }
    return count;
}

}  // namespace omnirt::engine
