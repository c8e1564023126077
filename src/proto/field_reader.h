#pragma once
// Internal to proto/: typed extraction of the fields of a map node of a Dom, with errors that
// name the field and the expected kind ("data_ready.chunk_id: expected int, got string").
//
// Field rules shared by every decoder in proto/:
//  * a required field that is absent is an error;
//  * an optional field may be absent or nil (both read as "not set");
//  * a Value-typed field ("any") may be absent and then reads as null;
//  * fields the reader is not asked about are ignored, so newer senders may add fields.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/value.h"
#include "proto/wire_dom.h"

namespace omnirt::proto::detail {

inline constexpr std::uint32_t kNoNode = 0xffffffff;

class FieldReader {
  public:
    // Reads the map at node `map` of `dom` (the caller checked its kind). The map is named in
    // errors as "context.suffix[index]" (".suffix" only when not empty, "[index]" only when
    // index >= 0), e.g. "data_ready.header" + "tensor_info" + 2. The views must outlive the
    // reader; nothing is allocated unless an error is reported.
    FieldReader(const Dom& dom, std::uint32_t map, std::string_view context,
                std::int64_t index = -1, std::string_view suffix = {})
        : dom_(dom), map_(map), context_(context), index_(index), suffix_(suffix) {}

    [[nodiscard]] Result<std::string> string(std::string_view name) const;
    [[nodiscard]] Result<std::optional<std::string>> optional_string(std::string_view name) const;
    [[nodiscard]] Result<std::int64_t> integer(std::string_view name) const;
    [[nodiscard]] Result<std::optional<std::int64_t>> optional_integer(std::string_view name) const;
    // An int >= 0.
    [[nodiscard]] Result<std::uint64_t> non_negative(std::string_view name) const;
    [[nodiscard]] Result<bool> boolean(std::string_view name) const;
    [[nodiscard]] Result<std::vector<std::uint8_t>> bytes(std::string_view name) const;
    // Any kind; null when absent. Placeholders go to `binder` with paths starting at `prefix`
    // (the path of this field from the document root).
    [[nodiscard]] Result<Value> any(std::string_view name, PlaceholderBinder* binder = nullptr,
                                    std::span<const PathStep> prefix = {}) const;
    // The node of a map or list field; optional_map gives kNoNode when absent or nil.
    [[nodiscard]] Result<std::uint32_t> map(std::string_view name) const;
    [[nodiscard]] Result<std::uint32_t> optional_map(std::string_view name) const;
    [[nodiscard]] Result<std::uint32_t> list(std::string_view name) const;
    [[nodiscard]] Result<std::uint32_t> optional_list(std::string_view name) const;

    // "context.suffix[index].name"
    [[nodiscard]] std::string where(std::string_view name) const;

  private:
    // The value node of field `name`, or kNoNode.
    [[nodiscard]] std::uint32_t find(std::string_view name) const;
    // The value node of a required field of kind `kind`, or an error.
    [[nodiscard]] Result<std::uint32_t> require(std::string_view name, NodeKind kind,
                                                std::string_view expected) const;

    const Dom& dom_;
    std::uint32_t map_;
    std::string_view context_;
    std::int64_t index_;
    std::string_view suffix_;
};

// "<where>: expected <expected>, got <kind>"
[[nodiscard]] Error type_error(std::string_view where, std::string_view expected, NodeKind got);

// The children of a list node: for (uint32_t c : ListChildren(dom, node)) ...
class ListChildren {
  public:
    ListChildren(const Dom& dom, std::uint32_t list) : dom_(dom), list_(list) {}
    class Iterator {
      public:
        Iterator(const Dom& dom, std::uint32_t node, std::uint32_t left)
            : dom_(&dom), node_(node), left_(left) {}
        std::uint32_t operator*() const { return node_; }
        Iterator& operator++() {
            node_ = dom_->skip(node_);
            --left_;
            return *this;
        }
        bool operator==(const Iterator& other) const { return left_ == other.left_; }

      private:
        const Dom* dom_;
        std::uint32_t node_;
        std::uint32_t left_;
    };
    [[nodiscard]] Iterator begin() const { return {dom_, list_ + 1, dom_.at(list_).count}; }
    [[nodiscard]] Iterator end() const { return {dom_, 0, 0}; }

  private:
    const Dom& dom_;
    std::uint32_t list_;
};

}  // namespace omnirt::proto::detail
