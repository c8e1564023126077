#include "models/qwen3_omni/thinker_inputs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

Error invalid(const std::string& message) {
    return Error{ErrorCode::invalid_argument, "qwen3_omni.thinker: " + message};
}

Result<at::Tensor> tensor_field(const Value& map, const std::string& key,
                                const std::string& where) {
    const Value* value = map.find(key);
    if (value == nullptr || !value->is_tensor()) {
        return fail(invalid(where + key + " must be a tensor"));
    }
    return torch_bridge::to_torch(value->as_tensor()).clone();
}

Result<std::int64_t> int_field(const Value& map, const std::string& key, const std::string& where) {
    const Value* value = map.find(key);
    if (value == nullptr || !value->is_int()) return fail(invalid(where + key + " must be an int"));
    return value->as_int();
}

// Values of one run: floating, [len, hidden], len >= 1.
Result<at::Tensor> run_values(at::Tensor values, std::int64_t hidden_size,
                              const std::string& where) {
    if (values.dim() != 2 || values.size(0) < 1 || values.size(1) != hidden_size ||
        !at::isFloatingType(values.scalar_type())) {
        return fail(invalid(where + "values must be a floating tensor [len >= 1, " +
                            std::to_string(hidden_size) + "]"));
    }
    return values;
}

// Runs must lie inside the prompt and must not overlap each other.
Status check_runs(const std::vector<engine::PositionRun>& runs, std::int64_t prompt,
                  const std::string& field) {
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;
    for (const engine::PositionRun& run : runs) {
        const std::int64_t end = run.begin + run.values.size(0);
        if (run.begin < 0 || end > prompt) {
            return fail(invalid(field + ": a run [" + std::to_string(run.begin) + ", " +
                                std::to_string(end) + ") lies outside the prompt of " +
                                std::to_string(prompt) + " tokens"));
        }
        spans.emplace_back(run.begin, end);
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i) {
        if (spans[i].first < spans[i - 1].second) {
            return fail(
                invalid(field + ": runs overlap at position " + std::to_string(spans[i].first)));
        }
    }
    return ok_status();
}

// A key for DeepStack layer k of a media item: distinct from the item's embedding key.
std::uint64_t layer_key(std::uint64_t key, std::int32_t layer) {
    return (key ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(layer + 1))) | 1;
}

}  // namespace

Status read_thinker_inputs(const StagePayload& payload, std::int64_t hidden_size,
                           std::int32_t max_layers, engine::RequestSetup& setup) {
    const Value& data = payload.data;
    const auto prompt = static_cast<std::int64_t>(setup.prompt.size());
    if (const Value* positions = data.find("positions"); positions != nullptr) {
        OMNI_TRY(at::Tensor values, tensor_field(data, "positions", "data."));
        if (values.dim() != 2 || values.size(0) != 3 || values.size(1) != prompt ||
            values.scalar_type() != at::kLong) {
            return fail(invalid("data.positions must be an int64 tensor [3, " +
                                std::to_string(prompt) + "]"));
        }
        if (prompt > 0 && values.min().item<std::int64_t>() < 0) {
            return fail(invalid("data.positions must not be negative"));
        }
        setup.positions = std::move(values);
    }
    if (data.find("rope_delta") != nullptr) {
        OMNI_TRY(setup.position_offset, int_field(data, "rope_delta", "data."));
        if (setup.position_offset < -prompt || setup.position_offset > (std::int64_t{1} << 40)) {
            return fail(invalid("data.rope_delta " + std::to_string(setup.position_offset) +
                                " is out of range"));
        }
    }
    if (const Value* runs = data.find("mm_runs"); runs != nullptr) {
        if (!runs->is_list()) return fail(invalid("data.mm_runs must be a list"));
        for (std::size_t i = 0; i < runs->as_list().size(); ++i) {
            const Value& run = runs->as_list()[i];
            const std::string where = "data.mm_runs[" + std::to_string(i) + "].";
            if (!run.is_map()) return fail(invalid(where + " must be a map"));
            OMNI_TRY(std::int64_t begin, int_field(run, "begin", where));
            OMNI_TRY(std::int64_t key, int_field(run, "key", where));
            OMNI_TRY(at::Tensor raw, tensor_field(run, "values", where));
            OMNI_TRY(at::Tensor values, run_values(std::move(raw), hidden_size, where));
            setup.embeddings.push_back({.begin = begin,
                                        .values = std::move(values),
                                        .content_key = static_cast<std::uint64_t>(key) | 1});
        }
        OMNI_RETURN_IF_ERROR(check_runs(setup.embeddings, prompt, "data.mm_runs"));
    }
    if (const Value* runs = data.find("deepstack_runs"); runs != nullptr) {
        if (!runs->is_list()) return fail(invalid("data.deepstack_runs must be a list"));
        std::vector<std::vector<engine::PositionRun>> per_layer;
        for (std::size_t i = 0; i < runs->as_list().size(); ++i) {
            const Value& run = runs->as_list()[i];
            const std::string where = "data.deepstack_runs[" + std::to_string(i) + "].";
            if (!run.is_map()) return fail(invalid(where + " must be a map"));
            OMNI_TRY(std::int64_t begin, int_field(run, "begin", where));
            OMNI_TRY(std::int64_t key, int_field(run, "key", where));
            const Value* layers = run.find("values");
            if (layers == nullptr || !layers->is_list() || layers->as_list().empty() ||
                static_cast<std::int64_t>(layers->as_list().size()) > max_layers) {
                return fail(invalid(where + "values must list 1 to " + std::to_string(max_layers) +
                                    " tensors"));
            }
            std::int64_t length = -1;
            for (std::size_t k = 0; k < layers->as_list().size(); ++k) {
                const Value& layer = layers->as_list()[k];
                const std::string at = where + "values[" + std::to_string(k) + "] ";
                if (!layer.is_tensor()) return fail(invalid(at + "must be a tensor"));
                OMNI_TRY(
                    at::Tensor values,
                    run_values(torch_bridge::to_torch(layer.as_tensor()).clone(), hidden_size, at));
                if (length >= 0 && values.size(0) != length) {
                    return fail(invalid(where + "values must all have the same rows"));
                }
                length = values.size(0);
                if (per_layer.size() <= k) per_layer.resize(k + 1);
                const auto layer_index = static_cast<std::int32_t>(k);
                per_layer[k].push_back(
                    {.begin = begin,
                     .values = std::move(values),
                     .content_key = layer_key(static_cast<std::uint64_t>(key), layer_index)});
            }
        }
        for (std::size_t k = 0; k < per_layer.size(); ++k) {
            const std::string field = "data.deepstack_runs (layer " + std::to_string(k) + ")";
            OMNI_RETURN_IF_ERROR(check_runs(per_layer[k], prompt, field));
            for (engine::PositionRun& run : per_layer[k]) {
                setup.layer_injections.push_back(
                    {.after_layers = static_cast<std::int32_t>(k + 1), .add = std::move(run)});
            }
        }
    }
    return ok_status();
}

}  // namespace omnirt::models::qwen3_omni
