// apply_override (config/node.h): `--set path=value` on a parsed config document.
#include <charconv>

#include "config/node.h"

namespace omnirt::config {
namespace {

std::vector<std::string> split_path(std::string_view path) {
    std::vector<std::string> segments;
    std::size_t start = 0;
    while (true) {
        std::size_t dot = path.find('.', start);
        segments.emplace_back(path.substr(start, dot - start));
        if (dot == std::string_view::npos) break;
        start = dot + 1;
    }
    return segments;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

void relocate(ConfigNode& node, const SourceLocation& location) {
    node.location = location;
    for (auto& item : node.items) relocate(item, location);
    for (auto& entry : node.entries) {
        entry.key_location = location;
        relocate(entry.value, location);
    }
}

std::string stage_names(const ConfigNode& stages) {
    std::string out;
    for (const auto& stage : stages.items) {
        const ConfigNode* name = stage.find("name");
        if (name == nullptr || !name->is_scalar()) continue;
        if (!out.empty()) out += ", ";
        out += name->text;
    }
    return out.empty() ? "none" : out;
}

ConfigNode* find_stage(ConfigNode& stages, const std::string& name) {
    for (auto& stage : stages.items) {
        const ConfigNode* stage_name = stage.find("name");
        if (stage_name != nullptr && stage_name->is_scalar() && stage_name->text == name) {
            return &stage;
        }
    }
    return nullptr;
}

}  // namespace

expected<void, Diagnostic> apply_override(ConfigNode& root, std::string_view assignment) {
    const SourceLocation here{"--set " + std::string(assignment), 0, 0};
    auto error = [&](std::string message) {
        return unexpected<Diagnostic>(Diagnostic{here, "", "", std::move(message)});
    };
    std::size_t equals = assignment.find('=');
    if (equals == std::string_view::npos) {
        return error("expected --set path=value (e.g. stages.thinker.gpu=1)");
    }
    std::string_view path = assignment.substr(0, equals);
    std::string_view value_text = assignment.substr(equals + 1);
    std::vector<std::string> segments = split_path(path);
    for (const auto& segment : segments) {
        if (segment.empty()) return error("empty segment in path '" + std::string(path) + "'");
    }

    auto parsed = parse_config_document(value_text, here.source);
    if (!parsed) {
        return error("cannot parse the value '" + std::string(value_text) +
                     "': " + parsed.error().message);
    }
    ConfigNode value = std::move(parsed).value();
    std::string_view trimmed = trim(value_text);
    bool flow = !trimmed.empty() && (trimmed.front() == '[' || trimmed.front() == '{');
    if (!flow && (value.is_map() || value.is_sequence())) {
        // `a: b` or `- x` would be block collections: a value on the command line is text.
        value = ConfigNode{};
        value.kind = NodeKind::scalar;
        value.text = std::string(value_text);
    }
    relocate(value, here);

    if (root.is_null()) {
        root.kind = NodeKind::map;
        root.location = here;
    }
    ConfigNode* node = &root;
    std::string walked;
    for (std::size_t i = 0; i < segments.size(); ++i) {
        const std::string& segment = segments[i];
        const bool last = i + 1 == segments.size();
        const bool stage_list = i == 1 && segments[0] == "stages";
        if (stage_list && !node->is_sequence()) {
            return error("cannot address stage '" + segment + "': 'stages' is " + describe(*node) +
                         ", not a list");
        }
        if (node->is_null()) {
            node->kind = NodeKind::map;
            node->location = here;
        }
        ConfigNode* child = nullptr;
        if (node->is_map()) {
            ConfigMapEntry* entry = node->find_entry(segment);
            if (entry == nullptr) {
                node->entries.push_back(ConfigMapEntry{segment, here, ConfigNode{}});
                entry = &node->entries.back();
                entry->value.location = here;
            }
            if (last) entry->key_location = here;
            child = &entry->value;
        } else if (stage_list) {
            child = find_stage(*node, segment);
            if (child == nullptr) {
                return error("unknown stage '" + segment + "' (stages: " + stage_names(*node) +
                             ")");
            }
        } else if (node->is_sequence()) {
            std::size_t index = 0;
            auto [end, ec] =
                std::from_chars(segment.data(), segment.data() + segment.size(), index);
            if (ec != std::errc() || end != segment.data() + segment.size()) {
                return error("'" + walked + "' is a list: address its items by index, not '" +
                             segment + "'");
            }
            if (index >= node->items.size()) {
                return error("index " + segment + " is out of range for '" + walked + "' (" +
                             std::to_string(node->items.size()) +
                             " items); set the whole list with " + walked + "=[...]");
            }
            child = &node->items[index];
        } else {
            return error("'" + walked + "' is " + describe(*node) + "; cannot set '" + segment +
                         "' inside it");
        }
        walked += (walked.empty() ? "" : ".") + segment;
        if (last) {
            *child = std::move(value);
            return {};
        }
        node = child;
    }
    return {};
}

}  // namespace omnirt::config
