#include "checkpoint/config_json.h"

namespace omnirt::checkpoint {

unexpected<Error> config_error(std::string_view model, const std::string& message) {
    return fail(ErrorCode::invalid_argument, std::string(model) + " config: " + message);
}

std::string shown_json(const nlohmann::json& value) {
    std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return text;
}

const nlohmann::json* json_member(const nlohmann::json& object, std::string_view key) {
    if (!object.is_object()) return nullptr;
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
}

std::string json_path(std::string_view where, std::string_view key) {
    return where.empty() ? std::string(key) : std::string(where) + "." + std::string(key);
}

}  // namespace omnirt::checkpoint
