#pragma once
// Internal to proto/: a flat, read-only document of one msgpack value, the first stage of every
// decoder in proto/.
//
// parse_dom runs msgpack-c's SAX parser (msgpack::parse with a visitor) and records each item as
// one Node in preorder, with strings, bytes and tensor bodies as views into the input. All
// limits and syntax rules are checked here, with byte offsets in the errors. Control messages
// read their fields straight from the nodes (proto/field_reader.h) and materialize a Value only
// for Value-typed fields, so the envelope costs one vector instead of a std::map per level.
//
// A Dom refers to the input bytes: they must outlive it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/value.h"
#include "proto/limits.h"

namespace omnirt::proto::detail {

enum class NodeKind : std::uint8_t {
    null,
    boolean,
    integer,
    floating,
    string,
    bytes,
    list,
    map,
    inline_tensor,
    placeholder
};
// The Value kind name of a node kind ("int", "map", "tensor"...), for error messages.
[[nodiscard]] std::string_view kind_name(NodeKind kind);

struct Node {
    NodeKind kind = NodeKind::null;
    bool boolean = false;
    std::uint32_t count = 0;    // list: elements; map: entries (children: key, value, key, ...)
    std::uint32_t length = 0;   // string, bytes, tensor: body bytes
    std::uint32_t subtree = 1;  // nodes in this subtree, itself included
    std::size_t offset = 0;     // string, bytes, tensor: body offset in the input
    union {
        std::int64_t integer;
        double floating;
        std::uint64_t index;  // placeholder
    } number{};
};

struct Dom {
    std::span<const std::uint8_t> input;
    std::vector<Node> nodes;  // preorder; nodes[0] is the root

    [[nodiscard]] const Node& at(std::uint32_t i) const { return nodes[i]; }
    [[nodiscard]] std::string_view text(const Node& node) const {
        return {reinterpret_cast<const char*>(input.data()) + node.offset, node.length};
    }
    [[nodiscard]] std::span<const std::uint8_t> body(const Node& node) const {
        return input.subspan(node.offset, node.length);
    }
    // The node after the subtree of node i (its next sibling, if any).
    [[nodiscard]] std::uint32_t skip(std::uint32_t i) const { return i + nodes[i].subtree; }
};

enum class TensorMode : std::uint8_t { inline_data, placeholders };

// Parses exactly one value spanning all of `input`. Depths above kMaxSupportedDepth act as
// kMaxSupportedDepth (materializing recurses once per level).
inline constexpr std::uint32_t kMaxSupportedDepth = 1024;
[[nodiscard]] Result<Dom> parse_dom(std::span<const std::uint8_t> input, const DecodeLimits& limits,
                                    TensorMode tensors);

// One step of the path to a placeholder while materializing; views live during the call only.
struct PathStep {
    std::string_view key;    // map key, when is_key
    std::int64_t index = 0;  // list index, otherwise
    bool is_key = false;
};

// Supplies the Value that replaces each placeholder (placeholder-mode documents only).
class PlaceholderBinder {
  public:
    virtual ~PlaceholderBinder() = default;
    [[nodiscard]] virtual Result<Value> bind(std::uint64_t index,
                                             std::span<const PathStep> path) = 0;
};

// The Value of the subtree at node i. Inline tensors get fresh aligned storage; placeholders
// are handed to `binder`, which must be non-null when the document has any, with their paths
// from the document root: `prefix` is the path of node i.
[[nodiscard]] Result<Value> materialize(const Dom& dom, std::uint32_t i,
                                        PlaceholderBinder* binder = nullptr,
                                        std::span<const PathStep> prefix = {});

}  // namespace omnirt::proto::detail
