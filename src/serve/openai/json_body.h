#pragma once
// Parsing a request body into nlohmann::json under RequestLimits, and typed field access that
// reports errors as ProtocolError naming the field path. Used by the chat and speech decoders.
//
// parse_body checks size and nesting depth (by a scan, before nlohmann builds anything), then
// parses strictly: invalid UTF-8, truncation, trailing data, comments -> 400. The top level
// must be an object.
//
// Thread safety: pure functions.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "serve/openai/limits.h"
#include "serve/openai/protocol_error.h"

namespace omnirt::serve::openai {

[[nodiscard]] ProtocolResult<nlohmann::json> parse_body(std::string_view body,
                                                        const RequestLimits& limits);

// "a.b" / "a[3]" path building.
[[nodiscard]] std::string field_path(std::string_view parent, std::string_view key);
[[nodiscard]] std::string index_path(std::string_view parent, std::size_t index);
[[nodiscard]] std::string_view json_type_name(const nlohmann::json& json);

// Field readers: absent or null -> std::nullopt; a wrong type -> 400 naming `path`.
[[nodiscard]] ProtocolResult<std::optional<std::string>> read_string(const nlohmann::json& object,
                                                                     std::string_view key,
                                                                     std::string_view parent,
                                                                     std::size_t max_bytes);
[[nodiscard]] ProtocolResult<std::optional<bool>> read_bool(const nlohmann::json& object,
                                                            std::string_view key,
                                                            std::string_view parent);
// Integers: JSON integers only (1.0 is a type error); beyond int64 -> out-of-range error.
[[nodiscard]] ProtocolResult<std::optional<std::int64_t>> read_int(const nlohmann::json& object,
                                                                   std::string_view key,
                                                                   std::string_view parent);
// Numbers: integers or finite floats.
[[nodiscard]] ProtocolResult<std::optional<double>> read_number(const nlohmann::json& object,
                                                                std::string_view key,
                                                                std::string_view parent);

// A JSON integer in [0, 2^31): a token id (the vocabulary check is the model's).
[[nodiscard]] bool is_token_id(const nlohmann::json& value);

}  // namespace omnirt::serve::openai
