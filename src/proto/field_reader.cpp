#include "proto/field_reader.h"

// The reader moves strings and bytes out of a map it holds by non-const reference; Value offers
// only const typed accessors, so the const_casts below act on objects that are not const.

namespace omnirt::proto::detail {

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

Error element_type_error(std::string_view where, std::string_view expected, const Value& got) {
    return Error{ErrorCode::invalid_argument, std::string(where) + ": expected " +
                                                  std::string(expected) + ", got " +
                                                  std::string(to_string(got.kind()))};
}

Error FieldReader::type_error(std::string_view name, std::string_view expected,
                              const Value& got) const {
    return element_type_error(where(name), expected, got);
}

Error FieldReader::missing(std::string_view name, std::string_view expected) const {
    return Error{ErrorCode::invalid_argument,
                 where(name) + ": missing field (expected " + std::string(expected) + ")"};
}

Value* FieldReader::find(std::string_view name) {
    auto it = map_.find(name);
    return it == map_.end() ? nullptr : &it->second;
}

Result<std::string> FieldReader::string(std::string_view name) {
    Value* value = find(name);
    if (value == nullptr) return fail(missing(name, "string"));
    if (!value->is_string()) return fail(type_error(name, "string", *value));
    return std::move(const_cast<std::string&>(*value->if_string()));
}

Result<std::optional<std::string>> FieldReader::optional_string(std::string_view name) {
    Value* value = find(name);
    if (value == nullptr || value->is_null()) return std::optional<std::string>();
    if (!value->is_string()) return fail(type_error(name, "string", *value));
    return std::optional<std::string>(std::move(const_cast<std::string&>(*value->if_string())));
}

Result<std::int64_t> FieldReader::integer(std::string_view name) {
    Value* value = find(name);
    if (value == nullptr) return fail(missing(name, "int"));
    if (!value->is_int()) return fail(type_error(name, "int", *value));
    return *value->if_int();
}

Result<std::optional<std::int64_t>> FieldReader::optional_integer(std::string_view name) {
    Value* value = find(name);
    if (value == nullptr || value->is_null()) return std::optional<std::int64_t>();
    if (!value->is_int()) return fail(type_error(name, "int", *value));
    return std::optional<std::int64_t>(*value->if_int());
}

Result<std::uint64_t> FieldReader::non_negative(std::string_view name) {
    OMNI_TRY(std::int64_t number, integer(name));
    if (number < 0) {
        return fail(ErrorCode::invalid_argument,
                    where(name) + ": expected a non-negative int, got " + std::to_string(number));
    }
    return static_cast<std::uint64_t>(number);
}

Result<bool> FieldReader::boolean(std::string_view name) {
    Value* value = find(name);
    if (value == nullptr) return fail(missing(name, "bool"));
    if (!value->is_bool()) return fail(type_error(name, "bool", *value));
    return *value->if_bool();
}

Result<std::vector<std::uint8_t>> FieldReader::bytes(std::string_view name) {
    Value* value = find(name);
    if (value == nullptr) return fail(missing(name, "bytes"));
    if (!value->is_bytes()) return fail(type_error(name, "bytes", *value));
    return std::move(const_cast<Bytes*>(value->if_bytes())->data);
}

Value FieldReader::any(std::string_view name) {
    Value* value = find(name);
    if (value == nullptr) return Value();
    return std::move(*value);
}

Result<Map*> FieldReader::map(std::string_view name) {
    Value* value = find(name);
    if (value == nullptr) return fail(missing(name, "map"));
    if (!value->is_map()) return fail(type_error(name, "map", *value));
    return value->if_map();
}

Result<Map*> FieldReader::optional_map(std::string_view name) {
    Value* value = find(name);
    if (value == nullptr || value->is_null()) return static_cast<Map*>(nullptr);
    if (!value->is_map()) return fail(type_error(name, "map", *value));
    return value->if_map();
}

Result<List*> FieldReader::list(std::string_view name) {
    Value* value = find(name);
    if (value == nullptr) return fail(missing(name, "list"));
    if (!value->is_list()) return fail(type_error(name, "list", *value));
    return value->if_list();
}

}  // namespace omnirt::proto::detail
