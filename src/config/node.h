#pragma once
// ConfigNode: a YAML (or JSON) document as a tree that remembers where each node was written,
// so that every config error can name file, line and column. Parsing keeps what the structs
// need and nothing else: scalars keep their text and whether they were quoted (quoted scalars
// are always strings; plain ones are typed by the YAML 1.2 core schema), maps keep their
// entries in file order. Duplicate map keys, non-scalar keys, more than one document, nesting
// deeper than kMaxConfigDepth and more than kMaxConfigNodes nodes (alias expansion included,
// and again for the copies anchors keep) are errors.
//
// JSON goes through the same parser (JSON is YAML flow syntax), so JSON configs report lines
// too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.h"
#include "config/schema.h"
#include "core/error.h"
#include "core/value.h"

namespace omnirt::config {

inline constexpr int kMaxConfigDepth = 64;
inline constexpr std::size_t kMaxConfigNodes = 100'000;

enum class NodeKind : std::uint8_t { null, scalar, sequence, map };
enum class ScalarType : std::uint8_t { null, boolean, integer, floating, string };

struct ConfigMapEntry;

struct ConfigNode {
    NodeKind kind = NodeKind::null;
    std::string text;                     // scalar: the text after YAML unescaping
    bool quoted = false;                  // scalar: '...', "..." or !!str; always a string
    std::vector<ConfigNode> items;        // sequence
    std::vector<ConfigMapEntry> entries;  // map, in file order, keys unique
    SourceLocation location;

    [[nodiscard]] bool is_null() const { return kind == NodeKind::null; }
    [[nodiscard]] bool is_scalar() const { return kind == NodeKind::scalar; }
    [[nodiscard]] bool is_sequence() const { return kind == NodeKind::sequence; }
    [[nodiscard]] bool is_map() const { return kind == NodeKind::map; }
    // Map lookup; null when this is not a map or has no such key.
    [[nodiscard]] const ConfigMapEntry* find_entry(std::string_view key) const;
    [[nodiscard]] ConfigMapEntry* find_entry(std::string_view key);
    [[nodiscard]] const ConfigNode* find(std::string_view key) const;
};

struct ConfigMapEntry {
    std::string key;
    SourceLocation key_location;
    ConfigNode value;
};

// Parses one document. `source_name` becomes SourceLocation::source of every node. An empty
// document gives a null node. Never throws: YAML errors become a Diagnostic at the position
// the YAML parser reports.
[[nodiscard]] expected<ConfigNode, Diagnostic> parse_config_document(
    std::string_view text, const std::string& source_name);

// The core-schema type of a scalar: quoted -> string; plain: null (`~`, `null`, empty),
// boolean (`true`/`false` in three casings), integer (decimal, 0x, 0o), floating (decimal,
// exponent, `.inf`, `.nan`), otherwise string. A null node is ScalarType::null; collections
// are not scalars (the result is string).
[[nodiscard]] ScalarType scalar_type(const ConfigNode& node);

// The node as a Value: maps become Map, sequences List, scalars by scalar_type(). Fails on an
// integer that does not fit in 64 bits.
[[nodiscard]] Result<Value> to_value(const ConfigNode& node);

// For messages: "null", "boolean true", "integer 5", "float 0.5", "string \"abc\"", "a list",
// "a map".
[[nodiscard]] std::string describe(const ConfigNode& node);

// Applies one `--set path=value` assignment (without the `--set`) to a document's root map.
// Path segments are separated by '.'; under `stages` a segment names a stage by its `name`,
// in other lists it is an index; missing map keys are created, a null on the way becomes a
// map. The value is parsed as a YAML scalar or flow collection (`[b, c]`, `{a: 1}`); text
// that YAML reads as a block collection stays a plain string. Every node the assignment
// creates, and the key it sets, is located at SourceLocation{"--set <assignment>"}.
// Errors (no '=', empty segment, unknown stage, index out of range, a path through a scalar,
// an unparsable value) come back as a Diagnostic located there.
[[nodiscard]] expected<void, Diagnostic> apply_override(ConfigNode& root,
                                                        std::string_view assignment);

}  // namespace omnirt::config
