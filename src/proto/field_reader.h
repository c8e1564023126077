#pragma once
// Internal to proto/: typed extraction of the fields of a decoded msgpack map, with errors that
// name the field and the expected kind ("data_ready.chunk_id: expected int, got string").
//
// Field rules shared by every decoder in proto/:
//  * a required field that is absent is an error;
//  * an optional field may be absent or null (both read as "not set");
//  * a Value-typed field ("any") may be absent and then reads as null;
//  * fields the reader is not asked about are ignored, so newer senders may add fields.
// The reader moves values out of the map: read each field once.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/value.h"

namespace omnirt::proto::detail {

class FieldReader {
public:
    // The map is named in errors as "context.suffix[index]" (".suffix" only when not empty,
    // "[index]" only when index >= 0), e.g. "data_ready.header" + "tensor_info" + 2. The views
    // must outlive the reader; nothing is allocated unless an error is reported.
    FieldReader(Map& map, std::string_view context, std::int64_t index = -1,
                std::string_view suffix = {})
        : map_(map), context_(context), index_(index), suffix_(suffix) {}

    [[nodiscard]] Result<std::string> string(std::string_view name);
    [[nodiscard]] Result<std::optional<std::string>> optional_string(std::string_view name);
    [[nodiscard]] Result<std::int64_t> integer(std::string_view name);
    [[nodiscard]] Result<std::optional<std::int64_t>> optional_integer(std::string_view name);
    // An int >= 0.
    [[nodiscard]] Result<std::uint64_t> non_negative(std::string_view name);
    [[nodiscard]] Result<bool> boolean(std::string_view name);
    [[nodiscard]] Result<std::vector<std::uint8_t>> bytes(std::string_view name);
    // Any kind; null when absent.
    [[nodiscard]] Value any(std::string_view name);
    // A map or list that stays owned by the reader's map; the pointer lives as long as it.
    [[nodiscard]] Result<Map*> map(std::string_view name);
    [[nodiscard]] Result<Map*> optional_map(std::string_view name);  // null when absent or null
    [[nodiscard]] Result<List*> list(std::string_view name);

    // "context.suffix[index].name"
    [[nodiscard]] std::string where(std::string_view name) const;
    // "<where>: expected <expected>, got <kind>"
    [[nodiscard]] Error type_error(std::string_view name, std::string_view expected,
                                   const Value& got) const;

private:
    Value* find(std::string_view name);
    Error missing(std::string_view name, std::string_view expected) const;

    Map& map_;
    std::string_view context_;
    std::int64_t index_;
    std::string_view suffix_;
};

// "expected <what>, got <kind>" for a value that is not a field of a map (list elements).
[[nodiscard]] Error element_type_error(std::string_view where, std::string_view expected,
                                       const Value& got);

}  // namespace omnirt::proto::detail
