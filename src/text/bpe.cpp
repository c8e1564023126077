// Byte-level BPE: ranked merges applied lowest rank first (ties: leftmost), as Hugging Face's
// Word::merge_all does, with a binary heap over a linked list of symbols.
#include "text/bpe.h"

#include <algorithm>
#include <bit>

#include "text/byte_level.h"
#include "text/utf8.h"

namespace omnirt::text::detail {
namespace {

constexpr std::size_t kMaxCachedWordBytes = 256;

std::uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
}

std::uint64_t mix(std::uint64_t key) {
    key ^= key >> 31;
    key *= 0x9E3779B97F4A7C15ull;
    key ^= key >> 29;
    return key;
}

std::string quoted(std::string_view spelling) {
    return "'" + std::string(spelling.substr(0, 100)) + "'";
}

struct Symbol {
    TokenId id;
    std::int32_t previous;  // -1: none
    std::int32_t next;      // -1: none
};

struct Candidate {
    std::int32_t rank;
    std::int32_t position;
    // std::push_heap builds a max-heap: order so that the lowest (rank, position) is on top.
    friend bool operator<(const Candidate& a, const Candidate& b) {
        return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
    }
};

}  // namespace

Result<std::unique_ptr<BpeModel>> BpeModel::create(BpeConfig config) {
    std::unique_ptr<BpeModel> model(new BpeModel());
    model->ignore_merges_ = config.ignore_merges;

    std::vector<std::pair<TokenId, const std::string*>> by_id;
    by_id.reserve(config.vocab.size());
    model->vocab_.reserve(config.vocab.size());
    for (auto& [spelling, id] : config.vocab) {
        if (id < 0 || id > kMaxTokenId) {
            return fail(ErrorCode::invalid_argument,
                        "model.vocab: id " + std::to_string(id) + " of " + quoted(spelling) +
                            " is outside 0.." + std::to_string(kMaxTokenId));
        }
        by_id.emplace_back(id, &spelling);
    }
    std::sort(by_id.begin(), by_id.end());
    for (std::size_t i = 1; i < by_id.size(); ++i) {
        if (by_id[i].first == by_id[i - 1].first) {
            return fail(ErrorCode::invalid_argument,
                        "model.vocab: id " + std::to_string(by_id[i].first) + " is given to both " +
                            quoted(*by_id[i - 1].second) + " and " + quoted(*by_id[i].second));
        }
    }
    for (auto& [spelling, id] : config.vocab) model->vocab_.emplace(std::move(spelling), id);

    for (int byte = 0; byte < 256; ++byte) {
        std::string spelling;
        append_code_point(byte_to_code_point(static_cast<std::uint8_t>(byte)), spelling);
        const auto found = model->vocab_.find(spelling);
        if (found == model->vocab_.end()) {
            return fail(ErrorCode::unimplemented,
                        "model.vocab has no token for byte " + std::to_string(byte) + " (" +
                            quoted(spelling) + "): only byte-level BPE vocabularies are supported");
        }
        model->byte_ids_[static_cast<std::size_t>(byte)] = found->second;
    }

    if (config.merges.size() > kMaxMerges) {
        return fail(ErrorCode::resource_exhausted,
                    "model.merges has " + std::to_string(config.merges.size()) +
                        " entries; the limit is " + std::to_string(kMaxMerges));
    }
    const std::size_t slots = std::bit_ceil(std::max<std::size_t>(16, config.merges.size() * 2));
    model->merge_table_.assign(slots, MergeEntry{});
    model->merge_mask_ = slots - 1;
    std::string joined;
    for (std::size_t rank = 0; rank < config.merges.size(); ++rank) {
        const auto& [left, right] = config.merges[rank];
        const std::string field = "model.merges[" + std::to_string(rank) + "]: ";
        const auto left_id = model->find(left);
        if (!left_id) {
            return fail(ErrorCode::invalid_argument,
                        field + quoted(left) + " is not in model.vocab");
        }
        const auto right_id = model->find(right);
        if (!right_id) {
            return fail(ErrorCode::invalid_argument,
                        field + quoted(right) + " is not in model.vocab");
        }
        joined.assign(left).append(right);
        const auto merged_id = model->find(joined);
        if (!merged_id) {
            return fail(ErrorCode::invalid_argument,
                        field + "the merged token " + quoted(joined) + " is not in model.vocab");
        }
        // A pair listed twice keeps its last rank, as Hugging Face's loader does.
        model->insert_merge(*left_id, *right_id, static_cast<std::int32_t>(rank), *merged_id);
    }

    if (model->ignore_merges_) {
        for (const auto& [spelling, id] : model->vocab_) {
            std::string bytes;
            if (append_byte_level_bytes(spelling, bytes)) model->vocab_by_bytes_.emplace(bytes, id);
        }
    }
    model->cache_ = std::make_unique<WordCache>(config.cache_capacity);
    return model;
}

BpeModel::~BpeModel() = default;

std::optional<TokenId> BpeModel::find(std::string_view spelling) const {
    const auto found = vocab_.find(std::string(spelling));
    if (found == vocab_.end()) return std::nullopt;
    return found->second;
}

void BpeModel::insert_merge(TokenId left, TokenId right, std::int32_t rank, TokenId merged) {
    const std::uint64_t key = pair_key(left, right);
    for (std::uint64_t slot = mix(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
        MergeEntry& entry = merge_table_[slot];
        if (entry.rank < 0 || entry.pair == key) {
            entry = MergeEntry{key, rank, merged};
            return;
        }
    }
}

std::optional<BpeModel::MergeResult> BpeModel::find_merge(TokenId left, TokenId right) const {
    const std::uint64_t key = pair_key(left, right);
    for (std::uint64_t slot = mix(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
        const MergeEntry& entry = merge_table_[slot];
        if (entry.rank < 0) return std::nullopt;
        if (entry.pair == key) return MergeResult{entry.rank, entry.merged};
    }
}

void BpeModel::merge_word(std::string_view word, std::vector<TokenId>& out) const {
    thread_local std::vector<Symbol> symbols;
    thread_local std::vector<Candidate> heap;
    symbols.clear();
    heap.clear();
    const auto size = static_cast<std::int32_t>(word.size());
    for (std::int32_t i = 0; i < size; ++i) {
        symbols.push_back({byte_ids_[static_cast<std::uint8_t>(word[static_cast<std::size_t>(i)])],
                           i - 1, i + 1 < size ? i + 1 : -1});
    }
    auto push_candidate = [&](std::int32_t position) {
        const Symbol& left = symbols[static_cast<std::size_t>(position)];
        if (left.next < 0) return;
        const auto merge = find_merge(left.id, symbols[static_cast<std::size_t>(left.next)].id);
        if (!merge) return;
        heap.push_back({merge->rank, position});
        std::push_heap(heap.begin(), heap.end());
    };
    for (std::int32_t i = 0; i + 1 < size; ++i) push_candidate(i);

    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end());
        const Candidate candidate = heap.back();
        heap.pop_back();
        Symbol& left = symbols[static_cast<std::size_t>(candidate.position)];
        if (left.id < 0 || left.next < 0) continue;  // merged away since it was queued
        Symbol& right = symbols[static_cast<std::size_t>(left.next)];
        const auto merge = find_merge(left.id, right.id);
        // Ranks are unique per pair, so a different rank means the pair changed: stale entry.
        if (!merge || merge->rank != candidate.rank) continue;
        left.id = merge->merged;
        right.id = -1;
        left.next = right.next;
        if (left.next >= 0)
            symbols[static_cast<std::size_t>(left.next)].previous = candidate.position;
        if (left.previous >= 0) push_candidate(left.previous);
        push_candidate(candidate.position);
    }
    for (std::int32_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
        out.push_back(symbols[static_cast<std::size_t>(i)].id);
    }
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
    if (word.size() == 1) {
        out.push_back(byte_ids_[static_cast<std::uint8_t>(word[0])]);
        return;
    }
    if (ignore_merges_) {
        const auto found = vocab_by_bytes_.find(std::string(word));
        if (found != vocab_by_bytes_.end()) {
            out.push_back(found->second);
            return;
        }
    }
    const bool cacheable = word.size() <= kMaxCachedWordBytes;
    if (cacheable && cache_->lookup(word, out)) return;
    const std::size_t first = out.size();
    merge_word(word, out);
    if (cacheable) {
        cache_->insert(word, std::span<const TokenId>(out).subspan(first));
    }
}

}  // namespace omnirt::text::detail
