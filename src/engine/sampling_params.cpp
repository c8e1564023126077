#include "engine/sampling_params.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace omnirt::engine {
namespace {

Error invalid(std::string_view where, std::string_view key, const std::string& message) {
    return Error{ErrorCode::invalid_argument,
                 std::string(where) + "." + std::string(key) + " " + message};
}

const Value* present(const Value& layer, std::string_view key) {
    const Value* value = layer.find(key);
    return value == nullptr || value->is_null() ? nullptr : value;
}

std::string number_text(double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", value);
    return buffer;
}

// A finite number in [low, high] (or (low, high] with low_open).
Status read_number(const Value& layer, std::string_view where, std::string_view key, double low,
                   bool low_open, double high, double& out) {
    const Value* value = present(layer, key);
    if (value == nullptr) return ok_status();
    if (!value->is_number()) {
        return fail(invalid(where, key, "must be a number, got " + value->debug_string()));
    }
    const double number = value->as_number();
    const bool low_ok = low_open ? number > low : number >= low;
    if (!std::isfinite(number) || !low_ok || number > high) {
        const std::string high_text =
            high == std::numeric_limits<double>::max() ? "inf)" : number_text(high) + "]";
        return fail(invalid(where, key,
                            "must be in " + std::string(low_open ? "(" : "[") + number_text(low) +
                                ", " + high_text + ", got " + value->debug_string()));
    }
    out = number;
    return ok_status();
}

Result<std::optional<std::int64_t>> read_int(const Value& layer, std::string_view where,
                                             std::string_view key, std::int64_t low,
                                             std::int64_t high) {
    const Value* value = present(layer, key);
    if (value == nullptr) return std::optional<std::int64_t>();
    const std::int64_t* number = value->if_int();
    if (number == nullptr) {
        return fail(invalid(where, key, "must be an integer, got " + value->debug_string()));
    }
    if (*number < low || *number > high) {
        return fail(invalid(where, key,
                            "must be in [" + std::to_string(low) + ", " + std::to_string(high) +
                                "], got " + std::to_string(*number)));
    }
    return std::optional(*number);
}

Status read_stop(const Value& layer, std::string_view where, SamplingParams& params) {
    const Value* value = present(layer, "stop");
    if (value == nullptr) return ok_status();
    std::vector<std::string> stops;
    if (const std::string* one = value->if_string()) {
        if (!one->empty()) stops.push_back(*one);
    } else if (const List* list = value->if_list()) {
        if (list->size() > kMaxStopStrings) {
            return fail(invalid(where, "stop",
                                "has more than " + std::to_string(kMaxStopStrings) + " strings"));
        }
        for (const Value& item : *list) {
            const std::string* text = item.if_string();
            if (text == nullptr) {
                return fail(invalid(
                    where, "stop",
                    "must be a string or a list of strings, got an item " + item.debug_string()));
            }
            if (!text->empty()) stops.push_back(*text);
        }
    } else {
        return fail(invalid(where, "stop",
                            "must be a string or a list of strings, got " + value->debug_string()));
    }
    params.stop = std::move(stops);
    return ok_status();
}

Status read_stop_token_ids(const Value& layer, std::string_view where, SamplingParams& params) {
    const Value* value = present(layer, "stop_token_ids");
    if (value == nullptr) return ok_status();
    const List* list = value->if_list();
    if (list == nullptr || list->size() > kMaxStopTokenIds) {
        return fail(invalid(where, "stop_token_ids",
                            "must be a list of at most " + std::to_string(kMaxStopTokenIds) +
                                " token ids, got " + value->debug_string()));
    }
    std::vector<std::int32_t> ids;
    for (const Value& item : *list) {
        const std::int64_t* id = item.if_int();
        if (id == nullptr || *id < 0 || *id > std::numeric_limits<std::int32_t>::max()) {
            return fail(invalid(where, "stop_token_ids",
                                "must hold non-negative token ids, got " + item.debug_string()));
        }
        ids.push_back(static_cast<std::int32_t>(*id));
    }
    params.stop_token_ids = std::move(ids);
    return ok_status();
}

Status read_logprobs(const Value& layer, std::string_view where, SamplingParams& params) {
    if (const Value* value = present(layer, "logprobs")) {
        if (const bool* on = value->if_bool()) {
            params.logprobs =
                *on ? std::optional<std::int64_t>(params.logprobs.value_or(0)) : std::nullopt;
        } else if (const std::int64_t* count = value->if_int();
                   count != nullptr && *count >= 0 && *count <= kMaxTopLogprobs) {
            params.logprobs = *count;
        } else {
            return fail(invalid(where, "logprobs",
                                "must be a bool or an integer in [0, " +
                                    std::to_string(kMaxTopLogprobs) + "], got " +
                                    value->debug_string()));
        }
    }
    OMNI_TRY(auto top, read_int(layer, where, "top_logprobs", 0, kMaxTopLogprobs));
    if (top) params.logprobs = *top;
    return ok_status();
}

}  // namespace

Status apply_sampling_layer(const Value& layer, std::string_view where, SamplingParams& params) {
    if (layer.is_null()) return ok_status();
    if (!layer.is_map()) {
        return fail(ErrorCode::invalid_argument,
                    std::string(where) + " must be a map, got " + layer.debug_string());
    }
    constexpr double kUnbounded = std::numeric_limits<double>::max();
    OMNI_RETURN_IF_ERROR(
        read_number(layer, where, "temperature", 0.0, false, kUnbounded, params.temperature));
    OMNI_RETURN_IF_ERROR(read_number(layer, where, "top_p", 0.0, true, 1.0, params.top_p));
    OMNI_RETURN_IF_ERROR(read_number(layer, where, "min_p", 0.0, false, 1.0, params.min_p));
    OMNI_RETURN_IF_ERROR(read_number(layer, where, "repetition_penalty", 0.0, true, kUnbounded,
                                     params.repetition_penalty));
    OMNI_RETURN_IF_ERROR(
        read_number(layer, where, "presence_penalty", -2.0, false, 2.0, params.presence_penalty));
    OMNI_RETURN_IF_ERROR(
        read_number(layer, where, "frequency_penalty", -2.0, false, 2.0, params.frequency_penalty));
    OMNI_TRY(auto top_k,
             read_int(layer, where, "top_k", -1, std::numeric_limits<std::int32_t>::max()));
    if (top_k) params.top_k = *top_k < 0 ? 0 : *top_k;
    OMNI_TRY(auto seed, read_int(layer, where, "seed", std::numeric_limits<std::int64_t>::min(),
                                 std::numeric_limits<std::int64_t>::max()));
    if (seed) params.seed = static_cast<std::uint64_t>(*seed);
    OMNI_TRY(auto max_tokens,
             read_int(layer, where, "max_tokens", 0, std::numeric_limits<std::int32_t>::max()));
    if (max_tokens) params.max_tokens = *max_tokens;
    OMNI_TRY(auto min_tokens,
             read_int(layer, where, "min_tokens", 0, std::numeric_limits<std::int32_t>::max()));
    if (min_tokens) params.min_tokens = *min_tokens;
    OMNI_RETURN_IF_ERROR(read_stop(layer, where, params));
    OMNI_RETURN_IF_ERROR(read_stop_token_ids(layer, where, params));
    if (const Value* ignore_eos = present(layer, "ignore_eos")) {
        const bool* flag = ignore_eos->if_bool();
        if (flag == nullptr) {
            return fail(
                invalid(where, "ignore_eos", "must be a bool, got " + ignore_eos->debug_string()));
        }
        params.ignore_eos = *flag;
    }
    return read_logprobs(layer, where, params);
}

Result<SamplingParams> parse_sampling_params(const Value& params, std::string_view stage_name,
                                             const SamplingParams& defaults,
                                             SamplingLayers layers) {
    SamplingParams out = defaults;
    if (params.is_null()) return out;
    if (!params.is_map()) {
        return fail(ErrorCode::invalid_argument,
                    "params must be a map, got " + params.debug_string());
    }
    // The top level holds only what the OpenAI layer puts there.
    const bool all = layers == SamplingLayers::all;
    Map top;
    for (const char* key : {"max_tokens", "stop", "seed"}) {
        if (!all && std::string_view(key) != "seed") continue;
        if (const Value* value = params.find(key)) top.emplace(key, *value);
    }
    OMNI_RETURN_IF_ERROR(apply_sampling_layer(Value(std::move(top)), "params", out));
    if (const Value* sampling = all ? params.find("sampling") : nullptr) {
        OMNI_RETURN_IF_ERROR(apply_sampling_layer(*sampling, "params.sampling", out));
    }
    if (const Value* stages = present(params, "stage_sampling")) {
        if (!stages->is_map()) {
            return fail(ErrorCode::invalid_argument,
                        "params.stage_sampling must be a map, got " + stages->debug_string());
        }
        if (const Value* mine = stages->find(stage_name)) {
            OMNI_RETURN_IF_ERROR(apply_sampling_layer(
                *mine, "params.stage_sampling." + std::string(stage_name), out));
        }
    }
    if (out.max_tokens && out.min_tokens > *out.max_tokens) {
        return fail(ErrorCode::invalid_argument, "min_tokens (" + std::to_string(out.min_tokens) +
                                                     ") exceeds max_tokens (" +
                                                     std::to_string(*out.max_tokens) + ")");
    }
    return out;
}

SamplingState::SamplingState(SamplingParams params, std::uint64_t fallback_seed)
    : params_(std::move(params)), rng_(params_.seed.value_or(fallback_seed)) {}

void SamplingState::add_prompt(std::span<const std::int32_t> tokens) {
    for (std::int32_t token : tokens) {
        if (seen_.insert(token).second) seen_order_.push_back(token);
    }
}

void SamplingState::add_output(std::int32_t token) {
    ++output_count_;
    if (seen_.insert(token).second) seen_order_.push_back(token);
    auto [it, inserted] = output_index_.try_emplace(token, output_counts_.size());
    if (inserted) {
        output_counts_.emplace_back(token, 1);
    } else {
        ++output_counts_[it->second].second;
    }
}

double SamplingState::next_uniform() {
    // 53 random bits: uniform in [0, 1), the same on every platform (unlike
    // std::uniform_real_distribution, whose algorithm the standard leaves open).
    return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

}  // namespace omnirt::engine
