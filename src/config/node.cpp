#include "config/node.h"

#include <charconv>
#include <cstdlib>
#include <limits>

namespace omnirt::config {
namespace {

bool is_null_text(std::string_view s) {
    return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

bool bool_text(std::string_view s, bool& out) {
    if (s == "true" || s == "True" || s == "TRUE") return out = true, true;
    if (s == "false" || s == "False" || s == "FALSE") return out = false, true;
    return false;
}

bool all_of(std::string_view s, bool (*pred)(char)) {
    if (s.empty()) return false;
    for (char c : s) {
        if (!pred(c)) return false;
    }
    return true;
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_octal(char c) { return c >= '0' && c <= '7'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Core-schema integer forms; `fits` says whether the value fits in int64.
bool int_text(std::string_view s, std::int64_t& out, bool& fits) {
    int base = 10;
    std::string_view digits = s;
    if (s.starts_with("0x")) {
        base = 16, digits = s.substr(2);
        if (!all_of(digits, is_hex)) return false;
    } else if (s.starts_with("0o")) {
        base = 8, digits = s.substr(2);
        if (!all_of(digits, is_octal)) return false;
    } else {
        std::string_view unsigned_part = s;
        if (!s.empty() && (s[0] == '-' || s[0] == '+')) unsigned_part = s.substr(1);
        if (!all_of(unsigned_part, is_digit)) return false;
        if (s[0] == '+') digits = s.substr(1);
    }
    auto result = std::from_chars(digits.data(), digits.data() + digits.size(), out, base);
    fits = result.ec == std::errc() && result.ptr == digits.data() + digits.size();
    return true;
}

// Core-schema float forms: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, .inf, .nan.
bool float_text(std::string_view s, double& out) {
    std::string_view body = s;
    bool negative = false;
    if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
        negative = body[0] == '-';
        body = body.substr(1);
    }
    if (body == ".inf" || body == ".Inf" || body == ".INF") {
        out = negative ? -std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::infinity();
        return true;
    }
    if (s == ".nan" || s == ".NaN" || s == ".NAN") {
        out = std::numeric_limits<double>::quiet_NaN();
        return true;
    }
    std::size_t i = 0;
    std::size_t int_digits = 0, frac_digits = 0;
    while (i < body.size() && is_digit(body[i])) ++i, ++int_digits;
    if (i < body.size() && body[i] == '.') {
        ++i;
        while (i < body.size() && is_digit(body[i])) ++i, ++frac_digits;
    }
    if (int_digits == 0 && frac_digits == 0) return false;
    if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
        ++i;
        if (i < body.size() && (body[i] == '-' || body[i] == '+')) ++i;
        std::size_t exp_digits = 0;
        while (i < body.size() && is_digit(body[i])) ++i, ++exp_digits;
        if (exp_digits == 0) return false;
    }
    if (i != body.size()) return false;
    // strtod accepts every string matched above; the C locale is never changed by omnirt.
    std::string copy(body);
    double value = std::strtod(copy.c_str(), nullptr);
    out = negative ? -value : value;
    return true;
}

std::string quote_for_message(const std::string& text) {
    constexpr std::size_t kMax = 60;
    if (text.size() <= kMax) return "\"" + text + "\"";
    return "\"" + text.substr(0, kMax) + "...\"";
}

}  // namespace

const ConfigMapEntry* ConfigNode::find_entry(std::string_view key) const {
    for (const auto& entry : entries) {
        if (entry.key == key) return &entry;
    }
    return nullptr;
}

ConfigMapEntry* ConfigNode::find_entry(std::string_view key) {
    for (auto& entry : entries) {
        if (entry.key == key) return &entry;
    }
    return nullptr;
}

const ConfigNode* ConfigNode::find(std::string_view key) const {
    const ConfigMapEntry* entry = find_entry(key);
    return entry ? &entry->value : nullptr;
}

ScalarType scalar_type(const ConfigNode& node) {
    if (node.kind == NodeKind::null) return ScalarType::null;
    if (node.kind != NodeKind::scalar || node.quoted) return ScalarType::string;
    const std::string& s = node.text;
    bool b = false;
    std::int64_t i = 0;
    bool fits = false;
    double d = 0;
    if (is_null_text(s)) return ScalarType::null;
    if (bool_text(s, b)) return ScalarType::boolean;
    if (int_text(s, i, fits)) return ScalarType::integer;
    if (float_text(s, d)) return ScalarType::floating;
    return ScalarType::string;
}

Result<Value> to_value(const ConfigNode& node) {
    switch (node.kind) {
        case NodeKind::null:
            return Value();
        case NodeKind::sequence: {
            List list;
            list.reserve(node.items.size());
            for (const auto& item : node.items) {
                OMNI_TRY(Value value, to_value(item));
                list.push_back(std::move(value));
            }
            return Value(std::move(list));
        }
        case NodeKind::map: {
            Map map;
            for (const auto& entry : node.entries) {
                OMNI_TRY(Value value, to_value(entry.value));
                map.insert_or_assign(entry.key, std::move(value));
            }
            return Value(std::move(map));
        }
        case NodeKind::scalar:
            break;
    }
    bool b = false;
    std::int64_t i = 0;
    bool fits = false;
    double d = 0;
    switch (scalar_type(node)) {
        case ScalarType::null:
            return Value();
        case ScalarType::boolean:
            bool_text(node.text, b);
            return Value(b);
        case ScalarType::integer:
            int_text(node.text, i, fits);
            if (!fits) {
                return fail(ErrorCode::out_of_range,
                            "integer " + node.text + " does not fit in 64 bits");
            }
            return Value(i);
        case ScalarType::floating:
            float_text(node.text, d);
            return Value(d);
        case ScalarType::string:
            break;
    }
    return Value(node.text);
}

std::string describe(const ConfigNode& node) {
    switch (node.kind) {
        case NodeKind::null:
            return "null";
        case NodeKind::sequence:
            return "a list";
        case NodeKind::map:
            return "a map";
        case NodeKind::scalar:
            break;
    }
    switch (scalar_type(node)) {
        case ScalarType::null:
            return "null";
        case ScalarType::boolean:
            return "boolean " + node.text;
        case ScalarType::integer:
            return "integer " + node.text;
        case ScalarType::floating:
            return "float " + node.text;
        case ScalarType::string:
            break;
    }
    return "string " + quote_for_message(node.text);
}

}  // namespace omnirt::config
