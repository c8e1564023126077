#pragma once
// Value <-> JSON, for command-line input and output (`omnirt run`) and, later, the HTTP layer.
//
// JSON -> Value: null, bool, integers (int64; larger ones are an error), floats, strings, arrays
// (List) and objects (Map); nesting deeper than `max_depth` is an error, never a stack overflow.
// Value -> JSON: bytes become {"bytes": <size>}; tensors {"tensor": {"dtype", "shape", "nbytes",
// "values" (only for host tensors of at most `max_tensor_values` elements)}}; non-finite floats
// become null (JSON has no NaN).
//
// Thread safety: pure functions.
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/error.h"
#include "core/value.h"

namespace omnirt::config {

[[nodiscard]] Result<Value> json_to_value(const nlohmann::json& json, int max_depth = 64);
// Parses `text` first; the error names the JSON syntax problem and its byte position.
[[nodiscard]] Result<Value> parse_json_value(std::string_view text, int max_depth = 64);
[[nodiscard]] nlohmann::json value_to_json(const Value& value, std::int64_t max_tensor_values = 64);

}  // namespace omnirt::config
