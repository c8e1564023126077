#include "config/parse_fields.h"

#include <algorithm>

namespace omnirt::config::detail {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// A known key close enough to `key` to be what the user meant: a near miss in spelling (at
// most 2 edits, and at most a third of the key), else a known key that contains it
// ("port" -> "base_port"). Empty when nothing is close.
std::string_view closest_key(std::string_view key, std::initializer_list<std::string_view> known) {
    std::string_view closest;
    std::size_t best = 3;
    for (std::string_view candidate : known) {
        std::size_t distance = edit_distance(key, candidate);
        if (distance < best && distance * 3 <= key.size()) best = distance, closest = candidate;
    }
    if (!closest.empty() || key.size() < 3) return closest;
    for (std::string_view candidate : known) {
        if (candidate.find(key) != std::string_view::npos) return candidate;
    }
    return {};
}

}  // namespace

std::optional<std::string> string_of(const ConfigNode& node) {
    if (!node.is_scalar() || scalar_type(node) != ScalarType::string) return std::nullopt;
    return node.text;
}

std::string type_message(const ConfigNode& value, std::string_view expected) {
    std::string message = "expected " + std::string(expected) + ", got " + describe(value);
    bool wants_string = expected.find("string") != std::string_view::npos;
    if (wants_string && value.is_scalar() && !value.quoted &&
        scalar_type(value) != ScalarType::null) {
        message += " (quote it to use it as a string)";
    }
    return message;
}

FieldReader::FieldReader(const ConfigNode& map, std::string stage, std::string prefix,
                         std::map<std::string, SourceLocation>& locations,
                         std::vector<Diagnostic>& out)
    : map_(map),
      stage_(std::move(stage)),
      prefix_(std::move(prefix)),
      locations_(locations),
      out_(out) {}

std::string FieldReader::field(std::string_view key) const { return prefix_ + std::string(key); }

void FieldReader::report(const SourceLocation& location, std::string_view key,
                         std::string message) {
    out_.push_back(Diagnostic{location, stage_, field(key), std::move(message)});
}

void FieldReader::wrong_type(const ConfigNode& value, std::string_view key,
                             std::string_view expected) {
    report(value.location, key, type_message(value, expected));
}

void FieldReader::reject_unknown_keys(std::initializer_list<std::string_view> known) {
    for (const auto& entry : map_.entries) {
        if (std::find(known.begin(), known.end(), entry.key) != known.end()) continue;
        std::string message = "unknown key";
        std::string_view suggestion = closest_key(entry.key, known);
        if (!suggestion.empty()) message += "; did you mean '" + std::string(suggestion) + "'?";
        message += " (valid keys: ";
        bool first = true;
        for (std::string_view candidate : known) {
            if (!first) message += ", ";
            message += candidate;
            first = false;
        }
        message += ")";
        report(entry.key_location, entry.key, std::move(message));
    }
}

void FieldReader::require(std::string_view key) {
    if (map_.find_entry(key) == nullptr) {
        report(map_.location, key, "missing required field '" + field(key) + "'");
    }
}

const ConfigNode* FieldReader::find(std::string_view key) {
    const ConfigMapEntry* entry = map_.find_entry(key);
    if (entry == nullptr) return nullptr;
    locations_[field(key)] = entry->key_location;
    return &entry->value;
}

std::optional<std::string> FieldReader::string(std::string_view key, bool nullable) {
    const ConfigNode* value = find(key);
    if (value == nullptr || (nullable && scalar_type(*value) == ScalarType::null)) {
        return std::nullopt;
    }
    auto text = string_of(*value);
    if (!text) wrong_type(*value, key, "a string");
    return text;
}

std::optional<std::int64_t> FieldReader::integer(std::string_view key, bool nullable) {
    const ConfigNode* value = find(key);
    if (value == nullptr || (nullable && scalar_type(*value) == ScalarType::null)) {
        return std::nullopt;
    }
    if (value->is_scalar() && scalar_type(*value) == ScalarType::integer) {
        auto converted = to_value(*value);
        if (converted) return converted->as_int();
        report(value->location, key, converted.error().message);
        return std::nullopt;
    }
    wrong_type(*value, key, "an integer");
    return std::nullopt;
}

std::optional<double> FieldReader::number(std::string_view key, bool nullable) {
    const ConfigNode* value = find(key);
    if (value == nullptr || (nullable && scalar_type(*value) == ScalarType::null)) {
        return std::nullopt;
    }
    ScalarType type = scalar_type(*value);
    if (value->is_scalar() && (type == ScalarType::integer || type == ScalarType::floating)) {
        auto converted = to_value(*value);
        if (converted) return converted->as_number();
        report(value->location, key, converted.error().message);
        return std::nullopt;
    }
    wrong_type(*value, key, "a number");
    return std::nullopt;
}

std::optional<bool> FieldReader::boolean(std::string_view key, bool nullable) {
    const ConfigNode* value = find(key);
    if (value == nullptr || (nullable && scalar_type(*value) == ScalarType::null)) {
        return std::nullopt;
    }
    if (value->is_scalar() && scalar_type(*value) == ScalarType::boolean) {
        return value->text[0] == 't' || value->text[0] == 'T';
    }
    wrong_type(*value, key, "a boolean (true or false)");
    return std::nullopt;
}

std::optional<std::vector<std::string>> FieldReader::string_list(std::string_view key,
                                                                 bool allow_single) {
    const ConfigNode* value = find(key);
    if (value == nullptr || scalar_type(*value) == ScalarType::null) return std::nullopt;
    std::string_view expected =
        allow_single ? "a string or a list of strings" : "a list of strings";
    if (allow_single && value->is_scalar()) {
        auto text = string_of(*value);
        if (!text) {
            wrong_type(*value, key, expected);
            return std::nullopt;
        }
        locations_[field(key) + "[0]"] = value->location;
        return std::vector<std::string>{*text};
    }
    if (!value->is_sequence()) {
        wrong_type(*value, key, expected);
        return std::nullopt;
    }
    std::vector<std::string> out;
    bool ok = true;
    for (std::size_t i = 0; i < value->items.size(); ++i) {
        const ConfigNode& item = value->items[i];
        std::string item_field = std::string(key) + "[" + std::to_string(i) + "]";
        locations_[field(item_field)] = item.location;
        auto text = string_of(item);
        if (!text) {
            wrong_type(item, item_field, "a string");
            ok = false;
            continue;
        }
        out.push_back(*text);
    }
    if (!ok) return std::nullopt;
    return out;
}

std::optional<std::map<std::string, std::string>> FieldReader::string_map(std::string_view key,
                                                                          bool scalars_as_text) {
    const ConfigNode* value = find(key);
    if (value == nullptr || scalar_type(*value) == ScalarType::null) return std::nullopt;
    if (!value->is_map()) {
        wrong_type(*value, key, "a map of strings");
        return std::nullopt;
    }
    std::map<std::string, std::string> out;
    bool ok = true;
    for (const auto& entry : value->entries) {
        std::string entry_field = std::string(key) + "." + entry.key;
        locations_[field(entry_field)] = entry.key_location;
        const ConfigNode& item = entry.value;
        std::optional<std::string> text = string_of(item);
        if (!text && scalars_as_text && item.is_scalar() && scalar_type(item) != ScalarType::null) {
            text = item.text;
        }
        if (!text) {
            wrong_type(item, entry_field, "a string");
            ok = false;
            continue;
        }
        out.emplace(entry.key, *text);
    }
    if (!ok) return std::nullopt;
    return out;
}

std::optional<Map> FieldReader::value_map(std::string_view key) {
    const ConfigNode* value = find(key);
    if (value == nullptr || scalar_type(*value) == ScalarType::null) return std::nullopt;
    if (!value->is_map()) {
        wrong_type(*value, key, "a map");
        return std::nullopt;
    }
    auto converted = to_value(*value);
    if (!converted) {
        report(value->location, key, converted.error().message);
        return std::nullopt;
    }
    return converted->as_map();
}

}  // namespace omnirt::config::detail
