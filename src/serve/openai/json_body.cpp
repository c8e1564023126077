#include "serve/openai/json_body.h"

#include <cmath>
#include <limits>

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::json;

struct Shape {
    int deepest = 0;         // nesting of arrays/objects
    std::size_t values = 0;  // an upper bound on the number of JSON values (1 + separators)
};

// Scans outside strings; stops early once `max_depth` is exceeded.
Shape body_shape(std::string_view text, int max_depth) {
    int depth = 0;
    Shape shape;
    shape.values = 1;
    int& deepest = shape.deepest;
    bool in_string = false;
    bool escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            ++shape.values;
            if (++depth > deepest) deepest = depth;
            if (deepest > max_depth) return shape;
        } else if (c == ']' || c == '}') {
            --depth;
        } else if (c == ',') {
            ++shape.values;
        }
    }
    return shape;
}

ProtocolResult<const Json*> find_field(const Json& object, std::string_view key) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
}

unexpected<ProtocolError> wrong_type(std::string path, std::string_view expected, const Json& got) {
    std::string message = "'" + path + "' must be " + std::string(expected) + ", not " +
                          std::string(json_type_name(got));
    return invalid_request(std::move(path), std::move(message));
}

}  // namespace

std::string_view json_type_name(const Json& json) {
    switch (json.type()) {
        case Json::value_t::null:
            return "null";
        case Json::value_t::boolean:
            return "a boolean";
        case Json::value_t::number_integer:
        case Json::value_t::number_unsigned:
            return "an integer";
        case Json::value_t::number_float:
            return "a number";
        case Json::value_t::string:
            return "a string";
        case Json::value_t::array:
            return "an array";
        case Json::value_t::object:
            return "an object";
        default:
            return "an unsupported value";
    }
}

ProtocolResult<Json> parse_body(std::string_view body, const RequestLimits& limits) {
    if (body.size() > limits.max_body_bytes) {
        return unexpected<ProtocolError>(ProtocolError{
            413,
            "request body of " + std::to_string(body.size()) + " bytes exceeds the limit of " +
                std::to_string(limits.max_body_bytes),
            "invalid_request_error", "", "request_too_large"});
    }
    if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
        return invalid_request("", "the request body is empty: expected a JSON object");
    }
    const Shape shape = body_shape(body, limits.max_depth);
    if (shape.deepest > limits.max_depth) {
        return invalid_request("", "the request body nests deeper than " +
                                       std::to_string(limits.max_depth) + " levels");
    }
    if (shape.values > limits.max_json_values) {
        return invalid_request("", "the request body holds more than " +
                                       std::to_string(limits.max_json_values) + " JSON values");
    }
    Json json;
    try {
        json = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/true,
                           /*ignore_comments=*/false);
    } catch (const Json::exception& error) {
        // nlohmann's message: "[json.exception.parse_error.101] parse error at line 1, column
        // 9: syntax error ... ". Keep the part after the bracketed id.
        std::string what = error.what();
        if (const auto pos = what.find("] "); pos != std::string::npos) what.erase(0, pos + 2);
        return invalid_request("", "the request body is not valid JSON: " + what);
    }
    if (!json.is_object()) {
        return invalid_request(
            "", "the request body must be a JSON object, not " + std::string(json_type_name(json)));
    }
    return json;
}

std::string field_path(std::string_view parent, std::string_view key) {
    if (parent.empty()) return std::string(key);
    std::string path(parent);
    path += '.';
    path += key;
    return path;
}

std::string index_path(std::string_view parent, std::size_t index) {
    return std::string(parent) + "[" + std::to_string(index) + "]";
}

ProtocolResult<std::optional<std::string>> read_string(const Json& object, std::string_view key,
                                                       std::string_view parent,
                                                       std::size_t max_bytes) {
    OMNI_TRY_P(const Json* field, find_field(object, key));
    if (field == nullptr) return std::optional<std::string>();
    if (!field->is_string()) return wrong_type(field_path(parent, key), "a string", *field);
    const auto& text = field->get_ref<const std::string&>();
    if (text.size() > max_bytes) {
        return invalid_request(field_path(parent, key), "'" + field_path(parent, key) +
                                                            "' is longer than " +
                                                            std::to_string(max_bytes) + " bytes");
    }
    return std::optional<std::string>(text);
}

ProtocolResult<std::optional<bool>> read_bool(const Json& object, std::string_view key,
                                              std::string_view parent) {
    OMNI_TRY_P(const Json* field, find_field(object, key));
    if (field == nullptr) return std::optional<bool>();
    if (!field->is_boolean()) return wrong_type(field_path(parent, key), "a boolean", *field);
    return std::optional<bool>(field->get<bool>());
}

ProtocolResult<std::optional<std::int64_t>> read_int(const Json& object, std::string_view key,
                                                     std::string_view parent) {
    OMNI_TRY_P(const Json* field, find_field(object, key));
    if (field == nullptr) return std::optional<std::int64_t>();
    if (field->is_number_unsigned()) {
        const auto value = field->get<std::uint64_t>();
        if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            return invalid_request(field_path(parent, key),
                                   "'" + field_path(parent, key) + "' is out of range");
        }
        return std::optional<std::int64_t>(static_cast<std::int64_t>(value));
    }
    if (field->is_number_integer()) return std::optional<std::int64_t>(field->get<std::int64_t>());
    return wrong_type(field_path(parent, key), "an integer", *field);
}

ProtocolResult<std::optional<double>> read_number(const Json& object, std::string_view key,
                                                  std::string_view parent) {
    OMNI_TRY_P(const Json* field, find_field(object, key));
    if (field == nullptr) return std::optional<double>();
    if (!field->is_number()) return wrong_type(field_path(parent, key), "a number", *field);
    const double value = field->get<double>();
    if (!std::isfinite(value)) {
        return invalid_request(field_path(parent, key),
                               "'" + field_path(parent, key) + "' is out of range");
    }
    return std::optional<double>(value);
}

bool is_token_id(const nlohmann::json& value) {
    if (value.is_number_unsigned()) return value.get<std::uint64_t>() <= INT32_MAX;
    return value.is_number_integer() && value.get<std::int64_t>() >= 0 &&
           value.get<std::int64_t>() <= INT32_MAX;
}

}  // namespace omnirt::serve::openai
