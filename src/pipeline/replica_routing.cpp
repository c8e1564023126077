#include "pipeline/replica_routing.h"

#include <string_view>

namespace omnirt::pipeline {
namespace {

constexpr std::uint64_t kFnvOffset = 14695981039346656037ULL;
constexpr std::uint64_t kFnvPrime = 1099511628211ULL;

void mix_bytes(std::uint64_t& hash, const void* data, std::size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
        hash ^= bytes[i];
        hash *= kFnvPrime;
    }
}

void mix_text(std::uint64_t& hash, std::string_view text) {
    const std::uint64_t size = text.size();
    mix_bytes(hash, &size, sizeof size);  // length first: ["ab", "c"] != ["a", "bc"]
    mix_bytes(hash, text.data(), text.size());
}

// A stable hash of a Value tree (tensors by dtype and shape only: their bytes may live on a
// device, and a conversation prefix is text).
void mix_value(std::uint64_t& hash, const Value& value) {
    const auto kind = static_cast<unsigned char>(value.kind());
    mix_bytes(hash, &kind, 1);
    if (const auto* text = value.if_string()) {
        mix_text(hash, *text);
    } else if (const auto* number = value.if_int()) {
        mix_bytes(hash, number, sizeof *number);
    } else if (const auto* real = value.if_float()) {
        mix_bytes(hash, real, sizeof *real);
    } else if (const auto* flag = value.if_bool()) {
        const unsigned char b = *flag ? 1 : 0;
        mix_bytes(hash, &b, 1);
    } else if (const auto* bytes = value.if_bytes()) {
        const std::uint64_t size = bytes->data.size();
        mix_bytes(hash, &size, sizeof size);
        mix_bytes(hash, bytes->data.data(), bytes->data.size());
    } else if (const auto* list = value.if_list()) {
        for (const auto& item : *list) mix_value(hash, item);
    } else if (const auto* map = value.if_map()) {
        for (const auto& [key, item] : *map) {
            mix_text(hash, key);
            mix_value(hash, item);
        }
    } else if (const auto* tensor = value.if_tensor()) {
        for (auto dim : tensor->shape()) mix_bytes(hash, &dim, sizeof dim);
    }
}

std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

std::optional<std::uint64_t> text_key(const Value& metadata, const char* field, char tag) {
    const Value* value = metadata.is_map() ? metadata.find(field) : nullptr;
    const std::string* text = value != nullptr ? value->if_string() : nullptr;
    if (text == nullptr || text->empty()) return std::nullopt;
    std::uint64_t hash = kFnvOffset;
    mix_bytes(hash, &tag, 1);
    mix_text(hash, *text);
    return hash;
}

}  // namespace

std::optional<std::uint64_t> routing_key(const OmniRequest& request) {
    if (auto key = text_key(request.metadata, "user", 'u')) return key;
    if (auto key = text_key(request.metadata, "session_id", 's')) return key;
    const Value* messages = request.inputs.is_map() ? request.inputs.find("messages") : nullptr;
    const List* list = messages != nullptr ? messages->if_list() : nullptr;
    if (list == nullptr) return std::nullopt;
    std::uint64_t hash = kFnvOffset;
    const char tag = 'p';
    mix_bytes(hash, &tag, 1);
    for (std::size_t i = 0; i < list->size(); ++i) {
        const Value& message = (*list)[i];
        mix_value(hash, message);
        const Value* role = message.is_map() ? message.find("role") : nullptr;
        // The first turn has the key of every later one, so the second turn finds the
        // replica that holds the first one's cache (and repeated prompts share a replica).
        if (role != nullptr && role->if_string() != nullptr && role->as_string() == "user") {
            return hash;
        }
    }
    return std::nullopt;
}

int sticky_replica(std::uint64_t key, const std::string& group, const std::vector<int>& serving) {
    std::uint64_t group_hash = kFnvOffset;
    mix_text(group_hash, group);
    int best = serving.front();
    std::uint64_t best_score = 0;
    for (int replica : serving) {
        std::uint64_t score =
            splitmix(key ^ splitmix(group_hash + static_cast<std::uint64_t>(replica)));
        if (score >= best_score) {
            best_score = score;
            best = replica;
        }
    }
    return best;
}

Status set_replica_routes(OmniRequest& request, const std::map<std::string, int>& routes) {
    if (request.metadata.is_null()) request.metadata = Value(Map{});
    Map* metadata = request.metadata.if_map();
    if (metadata == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    "request metadata must be a map (replica routing writes into it), not " +
                        std::string(to_string(request.metadata.kind())));
    }
    Map out;
    for (const auto& [stage, replica] : routes) out.emplace(stage, Value(replica));
    (*metadata)[kReplicaRoutesKey] = Value(std::move(out));
    return {};
}

std::map<std::string, int> replica_routes(const Value& metadata) {
    std::map<std::string, int> out;
    const Value* routes = metadata.is_map() ? metadata.find(kReplicaRoutesKey) : nullptr;
    const Map* map = routes != nullptr ? routes->if_map() : nullptr;
    if (map == nullptr) return out;
    for (const auto& [stage, replica] : *map) {
        if (const auto* index = replica.if_int();
            index != nullptr && *index >= 0 && *index < 1 << 16) {
            out.emplace(stage, static_cast<int>(*index));
        }
    }
    return out;
}

}  // namespace omnirt::pipeline
