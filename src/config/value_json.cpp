#include "config/value_json.h"

#include <cmath>

namespace omnirt::config {
namespace {

Result<Value> convert(const nlohmann::json& json, int depth, int max_depth) {
    if (depth > max_depth) {
        return fail(ErrorCode::out_of_range,
                    "JSON nested deeper than " + std::to_string(max_depth) + " levels");
    }
    switch (json.type()) {
        case nlohmann::json::value_t::null:
        case nlohmann::json::value_t::discarded:
            return Value();
        case nlohmann::json::value_t::boolean:
            return Value(json.get<bool>());
        case nlohmann::json::value_t::number_integer:
            return Value(json.get<std::int64_t>());
        case nlohmann::json::value_t::number_unsigned: {
            auto number = json.get<std::uint64_t>();
            if (number > static_cast<std::uint64_t>(INT64_MAX)) {
                return fail(ErrorCode::out_of_range,
                            "JSON integer " + std::to_string(number) + " does not fit int64");
            }
            return Value(static_cast<std::int64_t>(number));
        }
        case nlohmann::json::value_t::number_float:
            return Value(json.get<double>());
        case nlohmann::json::value_t::string:
            return Value(json.get<std::string>());
        case nlohmann::json::value_t::array: {
            List list;
            list.reserve(json.size());
            for (const auto& item : json) {
                OMNI_TRY(Value value, convert(item, depth + 1, max_depth));
                list.push_back(std::move(value));
            }
            return Value(std::move(list));
        }
        case nlohmann::json::value_t::object: {
            Map map;
            for (const auto& [key, item] : json.items()) {
                OMNI_TRY(Value value, convert(item, depth + 1, max_depth));
                map.emplace(key, std::move(value));
            }
            return Value(std::move(map));
        }
        case nlohmann::json::value_t::binary:
            return fail(ErrorCode::invalid_argument, "binary JSON values are not supported");
    }
    return fail(ErrorCode::invalid_argument, "unknown JSON value type");
}

template <class T>
void append_values(const Tensor& tensor, nlohmann::json& out) {
    const T* data = reinterpret_cast<const T*>(tensor.data());
    for (std::int64_t i = 0; i < tensor.numel(); ++i) {
        if constexpr (std::is_floating_point_v<T>) {
            double value = static_cast<double>(data[i]);
            out.push_back(std::isfinite(value) ? nlohmann::json(value) : nlohmann::json());
        } else {
            out.push_back(data[i]);
        }
    }
}

nlohmann::json tensor_json(const Tensor& tensor, std::int64_t max_values) {
    nlohmann::json info = {{"dtype", std::string(to_string(tensor.dtype()))},
                           {"shape", tensor.shape()},
                           {"nbytes", tensor.nbytes()}};
    if (tensor.defined() && tensor.device().is_cpu() && tensor.numel() <= max_values) {
        auto contiguous = tensor.contiguous();
        if (contiguous) {
            nlohmann::json values = nlohmann::json::array();
            switch (tensor.dtype()) {
                case DType::boolean:
                    append_values<bool>(*contiguous, values);
                    break;
                case DType::u8:
                    append_values<std::uint8_t>(*contiguous, values);
                    break;
                case DType::i8:
                    append_values<std::int8_t>(*contiguous, values);
                    break;
                case DType::i16:
                    append_values<std::int16_t>(*contiguous, values);
                    break;
                case DType::i32:
                    append_values<std::int32_t>(*contiguous, values);
                    break;
                case DType::i64:
                    append_values<std::int64_t>(*contiguous, values);
                    break;
                case DType::f32:
                    append_values<float>(*contiguous, values);
                    break;
                case DType::f64:
                    append_values<double>(*contiguous, values);
                    break;
                default:
                    values = nullptr;
                    break;  // f16 / bf16: shape only
            }
            if (!values.is_null()) info["values"] = std::move(values);
        }
    }
    return {{"tensor", std::move(info)}};
}

}  // namespace

Result<Value> json_to_value(const nlohmann::json& json, int max_depth) {
    return convert(json, 0, max_depth);
}

Result<Value> parse_json_value(std::string_view text, int max_depth) {
    nlohmann::json json;
    try {
        // The parser recurses per nesting level: refuse deep documents before parsing.
        int depth = 0;
        int deepest = 0;
        bool in_string = false;
        for (std::size_t i = 0; i < text.size(); ++i) {
            char c = text[i];
            if (in_string) {
                if (c == '\\')
                    ++i;
                else if (c == '"')
                    in_string = false;
            } else if (c == '"') {
                in_string = true;
            } else if (c == '[' || c == '{') {
                deepest = std::max(deepest, ++depth);
            } else if (c == ']' || c == '}') {
                --depth;
            }
        }
        if (deepest > max_depth) {
            return fail(ErrorCode::out_of_range,
                        "JSON nested deeper than " + std::to_string(max_depth) + " levels");
        }
        json = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& error) {
        return fail(ErrorCode::invalid_argument, std::string("invalid JSON: ") + error.what());
    }
    return json_to_value(json, max_depth);
}

nlohmann::json value_to_json(const Value& value, std::int64_t max_tensor_values) {
    switch (value.kind()) {
        case ValueKind::null:
            return nullptr;
        case ValueKind::boolean:
            return value.as_bool();
        case ValueKind::integer:
            return value.as_int();
        case ValueKind::floating: {
            double number = value.as_number();
            return std::isfinite(number) ? nlohmann::json(number) : nlohmann::json();
        }
        case ValueKind::string:
            return value.as_string();
        case ValueKind::bytes:
            return {{"bytes", value.if_bytes()->data.size()}};
        case ValueKind::list: {
            nlohmann::json out = nlohmann::json::array();
            for (const auto& item : value.as_list())
                out.push_back(value_to_json(item, max_tensor_values));
            return out;
        }
        case ValueKind::map: {
            nlohmann::json out = nlohmann::json::object();
            for (const auto& [key, item] : value.as_map())
                out[key] = value_to_json(item, max_tensor_values);
            return out;
        }
        case ValueKind::tensor:
            return tensor_json(value.as_tensor(), max_tensor_values);
    }
    return nullptr;
}

}  // namespace omnirt::config
