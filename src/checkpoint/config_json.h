#pragma once
// Small helpers for reading a checkpoint's config.json with error messages a user can act on,
// shared by the model families' config parsers (src/models/<family>/config.cpp and friends).
//
// Thread safety: pure functions.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

namespace omnirt::checkpoint {

// invalid_argument "<model> config: <message>" (model: "Qwen3", "S2-Pro", ...).
[[nodiscard]] unexpected<Error> config_error(std::string_view model, const std::string& message);

// A JSON value as an error message shows it: its dump, cut to 40 characters ("..." at the end).
[[nodiscard]] std::string shown_json(const nlohmann::json& value);

// The member `key` of an object; null when it is absent or JSON null (absent and null read the
// same in a config.json).
[[nodiscard]] const nlohmann::json* json_member(const nlohmann::json& object, std::string_view key);

// "where.key", or "key" when `where` is empty: the dotted path error messages name.
[[nodiscard]] std::string json_path(std::string_view where, std::string_view key);

}  // namespace omnirt::checkpoint
