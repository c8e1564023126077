#include "models/qwen3_omni/encoder_batch.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <unordered_map>
#include <utility>

#include "torch_bridge/torch_errors.h"

namespace omnirt::models::qwen3_omni {
namespace {

constexpr std::size_t kNoSlot = static_cast<std::size_t>(-1);

// One request of the batch on its way through run().
struct RequestWork {
    std::optional<Error> error;
    std::vector<EncoderInput> inputs;
    std::vector<std::optional<Value>> cached;  // per item: the cache's output
    std::vector<std::size_t> slot_of;          // per item: its slot, or kNoSlot when cached
    std::vector<std::size_t> slots;            // the distinct slots of the request
};

}  // namespace

EncoderBatcher::EncoderBatcher(std::string who, std::unique_ptr<const ItemEncoder> encoder,
                               std::size_t cache_bytes, EncoderStageHooks hooks)
    : who_(std::move(who)),
      encoder_(std::move(encoder)),
      cache_(cache_bytes),
      hooks_(std::move(hooks)) {}

Result<std::vector<EncoderInput>> EncoderBatcher::parse_request(const StagePayload& input) const {
    const Value* items = input.data.find("items");
    if (items == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    who_ + ": data.items is missing (a list of media items)");
    }
    const List* list = items->if_list();
    if (list == nullptr) {
        return fail(ErrorCode::invalid_argument, who_ + ": data.items must be a list, not " +
                                                     std::string(to_string(items->kind())));
    }
    if (list->empty()) return fail(ErrorCode::invalid_argument, who_ + ": data.items is empty");
    std::vector<EncoderInput> inputs;
    inputs.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
        const std::string where = who_ + ": data.items[" + std::to_string(i) + "]";
        const Value& item = (*list)[i];
        if (!item.is_map()) {
            return fail(ErrorCode::invalid_argument,
                        where + " must be a map, not " + std::string(to_string(item.kind())));
        }
        const Value* key = item.find("key");
        if (key == nullptr || !key->is_int()) {
            return fail(ErrorCode::invalid_argument,
                        where + ": 'key' must be an int (the item's content hash)");
        }
        auto parsed = encoder_->parse(item);
        if (!parsed) return fail(parsed.error().with_context(where));
        parsed->key = *key->if_int();
        parsed->cache_key.content = parsed->key;
        inputs.push_back(std::move(*parsed));
    }
    return inputs;
}

Result<std::vector<Map>> EncoderBatcher::forward(
    std::span<const EncoderInput* const> inputs) const {
    if (hooks_.before_forward) hooks_.before_forward();
    if (hooks_.counters) {
        hooks_.counters->forwards.fetch_add(1);
        hooks_.counters->items_computed.fetch_add(static_cast<std::int64_t>(inputs.size()));
    }
    try {
        auto outputs = encoder_->encode(inputs);
        if (!outputs) return fail(outputs.error().with_context(who_));
        if (outputs->size() != inputs.size()) {
            return fail(ErrorCode::internal, who_ + ": the encoder returned " +
                                                 std::to_string(outputs->size()) + " outputs for " +
                                                 std::to_string(inputs.size()) + " items");
        }
        return outputs;
    } catch (...) {
        return fail(ErrorCode::internal,
                    who_ + ": encoder forward failed: " + torch_bridge::current_exception_text());
    }
}

std::vector<Result<StagePayload>> EncoderBatcher::run(
    const std::vector<pipeline::BatchItem>& batch) {
    std::vector<RequestWork> work(batch.size());
    auto aborted = [&](std::size_t request) {
        return batch[request].emitter != nullptr && batch[request].emitter->aborted();
    };

    // Parse every request; look every item up in the cache; give each missing output one slot.
    std::vector<const EncoderInput*> slot_inputs;
    std::unordered_map<EncoderCacheKey, std::size_t, EncoderCacheKeyHash> slot_index;
    for (std::size_t r = 0; r < batch.size(); ++r) {
        RequestWork& request = work[r];
        if (aborted(r)) {
            request.error = Error{ErrorCode::aborted, who_ + ": request aborted"};
            continue;
        }
        auto parsed = [&]() -> Result<std::vector<EncoderInput>> {
            try {
                return parse_request(*batch[r].input);
            } catch (...) {
                return fail(ErrorCode::internal, who_ + ": reading data.items: " +
                                                     torch_bridge::current_exception_text());
            }
        }();
        if (!parsed) {
            request.error = std::move(parsed).error();
            continue;
        }
        request.inputs = std::move(*parsed);
        request.cached.resize(request.inputs.size());
        request.slot_of.assign(request.inputs.size(), kNoSlot);
        for (std::size_t i = 0; i < request.inputs.size(); ++i) {
            const EncoderInput& input = request.inputs[i];
            if (auto hit = cache_.find(input.cache_key)) {
                request.cached[i] = std::move(*hit);
                if (hooks_.counters) hooks_.counters->cache_hits.fetch_add(1);
                continue;
            }
            auto [entry, added] = slot_index.emplace(input.cache_key, slot_inputs.size());
            if (added) slot_inputs.push_back(&input);
            request.slot_of[i] = entry->second;
            if (std::find(request.slots.begin(), request.slots.end(), entry->second) ==
                request.slots.end()) {
                request.slots.push_back(entry->second);
            }
        }
    }

    // One forward over every slot; should it fail, each request alone.
    std::vector<std::optional<Map>> slot_outputs(slot_inputs.size());
    if (!slot_inputs.empty()) {
        auto outputs = forward(slot_inputs);
        if (outputs) {
            for (std::size_t s = 0; s < outputs->size(); ++s) slot_outputs[s] = (*outputs)[s];
        } else {
            std::size_t involved = 0;
            for (const RequestWork& request : work) involved += request.slots.empty() ? 0 : 1;
            for (RequestWork& request : work) {
                if (request.slots.empty()) continue;
                if (involved == 1) {
                    request.error = outputs.error();
                    break;
                }
                std::vector<std::size_t> missing;
                std::vector<const EncoderInput*> inputs;
                for (std::size_t s : request.slots) {
                    if (slot_outputs[s]) continue;
                    missing.push_back(s);
                    inputs.push_back(slot_inputs[s]);
                }
                if (inputs.empty()) continue;
                auto alone = forward(inputs);
                if (!alone) {
                    request.error = std::move(alone).error();
                    continue;
                }
                for (std::size_t m = 0; m < missing.size(); ++m) {
                    slot_outputs[missing[m]] = (*alone)[m];
                }
            }
        }
    }
    for (std::size_t s = 0; s < slot_outputs.size(); ++s) {
        if (!slot_outputs[s]) continue;
        slot_outputs[s]->insert_or_assign("key", Value(slot_inputs[s]->key));
        cache_.insert(slot_inputs[s]->cache_key, Value(*slot_outputs[s]));
    }
    if (hooks_.counters) {
        hooks_.counters->cache_bytes.store(static_cast<std::int64_t>(cache_.bytes()));
    }

    std::vector<Result<StagePayload>> results;
    results.reserve(batch.size());
    for (std::size_t r = 0; r < batch.size(); ++r) {
        RequestWork& request = work[r];
        if (!request.error && aborted(r)) {
            request.error = Error{ErrorCode::aborted, who_ + ": request aborted"};
        }
        if (request.error) {
            results.emplace_back(fail(std::move(*request.error)));
            continue;
        }
        List items;
        items.reserve(request.inputs.size());
        for (std::size_t i = 0; i < request.inputs.size(); ++i) {
            if (request.cached[i]) {
                items.push_back(std::move(*request.cached[i]));
            } else {
                items.emplace_back(*slot_outputs[request.slot_of[i]]);
            }
        }
        const StagePayload& input = *batch[r].input;
        results.emplace_back(StagePayload{.request_id = input.request_id,
                                          .request = input.request,
                                          .data = Value(Map{{"items", Value(std::move(items))}})});
    }
    return results;
}

}  // namespace omnirt::models::qwen3_omni
