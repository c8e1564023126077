#include "serve/openai/sampling.h"

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
    return Value(std::move(map));
}

}  // namespace omnirt::serve::openai
