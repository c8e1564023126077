#include "proto/field_reader.h"

namespace omnirt::proto::detail {

Error type_error(std::string_view where, std::string_view expected, NodeKind got) {
    return Error{ErrorCode::invalid_argument, std::string(where) + ": expected " +
                                                  std::string(expected) + ", got " +
                                                  std::string(kind_name(got))};
}

std::string FieldReader::where(std::string_view name) const {
    std::string out(context_);
    if (!suffix_.empty()) {
        out += '.';
        out += suffix_;
    }
    if (index_ >= 0) out += "[" + std::to_string(index_) + "]";
    if (!out.empty()) out += '.';
    out += name;
    return out;
}

std::uint32_t FieldReader::find(std::string_view name) const {
    const Node& map = dom_.at(map_);
    std::uint32_t key = map_ + 1;
    for (std::uint32_t k = 0; k < map.count; ++k, key = dom_.skip(key + 1)) {
        if (dom_.text(dom_.at(key)) == name) return key + 1;
    }
    return kNoNode;
}

Result<std::uint32_t> FieldReader::require(std::string_view name, NodeKind kind,
                                           std::string_view expected) const {
    const std::uint32_t node = find(name);
    if (node == kNoNode) {
        return fail(ErrorCode::invalid_argument,
                    where(name) + ": missing field (expected " + std::string(expected) + ")");
    }
    if (dom_.at(node).kind != kind)
        return fail(type_error(where(name), expected, dom_.at(node).kind));
    return node;
}

Result<std::string> FieldReader::string(std::string_view name) const {
    OMNI_TRY(std::uint32_t node, require(name, NodeKind::string, "string"));
    return std::string(dom_.text(dom_.at(node)));
}

Result<std::optional<std::string>> FieldReader::optional_string(std::string_view name) const {
    const std::uint32_t node = find(name);
    if (node == kNoNode || dom_.at(node).kind == NodeKind::null) {
        return std::optional<std::string>();
    }
    if (dom_.at(node).kind != NodeKind::string) {
        return fail(type_error(where(name), "string", dom_.at(node).kind));
    }
    return std::optional<std::string>(std::string(dom_.text(dom_.at(node))));
}

Result<std::int64_t> FieldReader::integer(std::string_view name) const {
    OMNI_TRY(std::uint32_t node, require(name, NodeKind::integer, "int"));
    return dom_.at(node).number.integer;
}

Result<std::optional<std::int64_t>> FieldReader::optional_integer(std::string_view name) const {
    const std::uint32_t node = find(name);
    if (node == kNoNode || dom_.at(node).kind == NodeKind::null) {
        return std::optional<std::int64_t>();
    }
    if (dom_.at(node).kind != NodeKind::integer) {
        return fail(type_error(where(name), "int", dom_.at(node).kind));
    }
    return std::optional<std::int64_t>(dom_.at(node).number.integer);
}

Result<std::uint64_t> FieldReader::non_negative(std::string_view name) const {
    OMNI_TRY(std::int64_t number, integer(name));
    if (number < 0) {
        return fail(ErrorCode::invalid_argument,
                    where(name) + ": expected a non-negative int, got " + std::to_string(number));
    }
    return static_cast<std::uint64_t>(number);
}

Result<bool> FieldReader::boolean(std::string_view name) const {
    OMNI_TRY(std::uint32_t node, require(name, NodeKind::boolean, "bool"));
    return dom_.at(node).boolean;
}

Result<std::vector<std::uint8_t>> FieldReader::bytes(std::string_view name) const {
    OMNI_TRY(std::uint32_t node, require(name, NodeKind::bytes, "bytes"));
    auto body = dom_.body(dom_.at(node));
    return std::vector<std::uint8_t>(body.begin(), body.end());
}

Result<Value> FieldReader::any(std::string_view name, PlaceholderBinder* binder,
                               std::span<const PathStep> prefix) const {
    const std::uint32_t node = find(name);
    if (node == kNoNode) return Value();
    return materialize(dom_, node, binder, prefix);
}

Result<std::uint32_t> FieldReader::map(std::string_view name) const {
    return require(name, NodeKind::map, "map");
}

Result<std::uint32_t> FieldReader::optional_map(std::string_view name) const {
    const std::uint32_t node = find(name);
    if (node == kNoNode || dom_.at(node).kind == NodeKind::null) return kNoNode;
    if (dom_.at(node).kind != NodeKind::map) {
        return fail(type_error(where(name), "map", dom_.at(node).kind));
    }
    return node;
}

Result<std::uint32_t> FieldReader::list(std::string_view name) const {
    return require(name, NodeKind::list, "list");
}

Result<std::uint32_t> FieldReader::optional_list(std::string_view name) const {
    const std::uint32_t node = find(name);
    if (node == kNoNode || dom_.at(node).kind == NodeKind::null) return kNoNode;
    if (dom_.at(node).kind != NodeKind::list) {
        return fail(type_error(where(name), "list", dom_.at(node).kind));
    }
    return node;
}

}  // namespace omnirt::proto::detail
