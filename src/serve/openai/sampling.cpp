#include "serve/openai/sampling.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "serve/openai/json_body.h"

namespace omnirt::serve::openai {
namespace {

std::string format_number(double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    // Shortest form that reads back the same.
    for (int precision = 1; precision <= 17; ++precision) {
        char shorter[32];
        std::snprintf(shorter, sizeof shorter, "%.*g", precision, value);
        if (std::strtod(shorter, nullptr) == value) return shorter;
    }
    return buffer;
}

struct Range {
    double low;
    bool low_open;
    double high;
};

ProtocolResult<std::optional<double>> ranged(const nlohmann::json& object, std::string_view key,
                                             std::string_view parent, Range range) {
    OMNI_TRY_P(auto value, read_number(object, key, parent));
    if (!value) return value;
    const bool low_ok = range.low_open ? *value > range.low : *value >= range.low;
    if (!low_ok || *value > range.high) {
        const std::string path = field_path(parent, key);
        return invalid_request(path, "'" + path + "' must be in " + (range.low_open ? "(" : "[") +
                                         format_number(range.low) + ", " +
                                         format_number(range.high) + "], got " +
                                         format_number(*value));
    }
    return value;
}

constexpr std::size_t kMaxStopTokenIds = 1024;

ProtocolResult<std::optional<std::vector<std::int64_t>>> read_token_ids(
    const nlohmann::json& object, std::string_view key, std::string_view parent) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return std::optional<std::vector<std::int64_t>>{};
    const std::string path = field_path(parent, key);
    if (!it->is_array() || it->size() > kMaxStopTokenIds) {
        return invalid_request(path, "'" + path + "' must be an array of at most " +
                                         std::to_string(kMaxStopTokenIds) + " token ids");
    }
    std::vector<std::int64_t> ids;
    for (std::size_t i = 0; i < it->size(); ++i) {
        const nlohmann::json& id = (*it)[i];
        const bool in_range = is_token_id(id);
        if (!in_range) {
            const std::string item = index_path(path, i);
            return invalid_request(item, "'" + item + "' must be a token id (an integer >= 0)");
        }
        ids.push_back(id.get<std::int64_t>());
    }
    return std::optional<std::vector<std::int64_t>>{std::move(ids)};
}

}  // namespace

ProtocolResult<SamplingParams> parse_sampling(const nlohmann::json& object,
                                              std::string_view parent) {
    SamplingParams out;
    OMNI_TRY_P(out.temperature, ranged(object, "temperature", parent, {0.0, false, 2.0}));
    OMNI_TRY_P(out.top_p, ranged(object, "top_p", parent, {0.0, true, 1.0}));
    OMNI_TRY_P(out.min_p, ranged(object, "min_p", parent, {0.0, false, 1.0}));
    OMNI_TRY_P(out.presence_penalty,
               ranged(object, "presence_penalty", parent, {-2.0, false, 2.0}));
    OMNI_TRY_P(out.frequency_penalty,
               ranged(object, "frequency_penalty", parent, {-2.0, false, 2.0}));
    OMNI_TRY_P(out.repetition_penalty,
               ranged(object, "repetition_penalty", parent, {0.0, true, 10.0}));
    OMNI_TRY_P(out.top_k, read_int(object, "top_k", parent));
    if (out.top_k && *out.top_k < -1) {
        const std::string path = field_path(parent, "top_k");
        return invalid_request(path, "'" + path + "' must be -1 (disabled) or >= 0, got " +
                                         std::to_string(*out.top_k));
    }
    OMNI_TRY_P(out.seed, read_int(object, "seed", parent));
    OMNI_TRY_P(out.min_tokens, read_int(object, "min_tokens", parent));
    if (out.min_tokens && *out.min_tokens < 0) {
        const std::string path = field_path(parent, "min_tokens");
        return invalid_request(
            path, "'" + path + "' must be >= 0, got " + std::to_string(*out.min_tokens));
    }
    OMNI_TRY_P(out.ignore_eos, read_bool(object, "ignore_eos", parent));
    OMNI_TRY_P(out.stop_token_ids, read_token_ids(object, "stop_token_ids", parent));
    return out;
}

Value sampling_to_value(const SamplingParams& sampling) {
    Map map;
    auto put = [&map](std::string_view key, const auto& field) {
        if (field) map.emplace(std::string(key), Value(*field));
    };
    put("temperature", sampling.temperature);
    put("top_p", sampling.top_p);
    put("top_k", sampling.top_k);
    put("min_p", sampling.min_p);
    put("presence_penalty", sampling.presence_penalty);
    put("frequency_penalty", sampling.frequency_penalty);
    put("repetition_penalty", sampling.repetition_penalty);
    put("seed", sampling.seed);
    put("min_tokens", sampling.min_tokens);
    put("ignore_eos", sampling.ignore_eos);
    put("max_tokens", sampling.max_tokens);
    if (sampling.stop_token_ids) {
        List ids;
        for (std::int64_t id : *sampling.stop_token_ids) ids.emplace_back(id);
        map.emplace("stop_token_ids", Value(std::move(ids)));
    }
    return Value(std::move(map));
}

}  // namespace omnirt::serve::openai
