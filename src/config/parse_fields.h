#pragma once
// Internal to the config loader (parse_*.cpp): typed reads of one config map with diagnostics.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.h"
#include "config/node.h"

namespace omnirt::config::detail {

// Reads the fields of one config map (the pipeline, a stage, a relay or endpoints block).
// Every read of a present key records the key's location in `locations` under
// `prefix + key` and, when the value has the wrong type, appends a diagnostic naming the
// field and the expected type. Reads return nullopt when the key is absent, null (for
// `nullable` fields: the spec's "or None" fields and collections that default to empty), or
// wrong.
class FieldReader {
  public:
    FieldReader(const ConfigNode& map, std::string stage, std::string prefix,
                std::map<std::string, SourceLocation>& locations, std::vector<Diagnostic>& out);

    // One diagnostic per key not in `known`, listing the valid keys and any near match.
    void reject_unknown_keys(std::initializer_list<std::string_view> known);
    // "missing required field" at the map's location when `key` is absent.
    void require(std::string_view key);
    // A diagnostic about `key` at `location`.
    void report(const SourceLocation& location, std::string_view key, std::string message);
    void wrong_type(const ConfigNode& value, std::string_view key, std::string_view expected);

    // The value of `key` or null; records the key's location.
    [[nodiscard]] const ConfigNode* find(std::string_view key);

    [[nodiscard]] std::optional<std::string> string(std::string_view key, bool nullable = true);
    [[nodiscard]] std::optional<std::int64_t> integer(std::string_view key, bool nullable = true);
    [[nodiscard]] std::optional<double> number(std::string_view key, bool nullable = true);
    [[nodiscard]] std::optional<bool> boolean(std::string_view key, bool nullable = true);
    // A list of strings, item i located as `key[i]`; `allow_single` also takes one string.
    [[nodiscard]] std::optional<std::vector<std::string>> string_list(std::string_view key,
                                                                      bool allow_single = false);
    // A map of strings, entry k located as `key.k`. `scalars_as_text` takes numbers and
    // booleans as the text they were written as (env_defaults: `OMP_NUM_THREADS: 4`).
    [[nodiscard]] std::optional<std::map<std::string, std::string>> string_map(
        std::string_view key, bool scalars_as_text = false);
    // A map of arbitrary values (factory_args).
    [[nodiscard]] std::optional<Map> value_map(std::string_view key);

    [[nodiscard]] const ConfigNode& map() const { return map_; }
    [[nodiscard]] const std::string& stage() const { return stage_; }
    [[nodiscard]] std::string field(std::string_view key) const;
    [[nodiscard]] std::map<std::string, SourceLocation>& locations() { return locations_; }
    [[nodiscard]] std::vector<Diagnostic>& diagnostics() { return out_; }

  private:
    const ConfigNode& map_;
    std::string stage_;
    std::string prefix_;
    std::map<std::string, SourceLocation>& locations_;
    std::vector<Diagnostic>& out_;
};

// `nodes:` (parse_nodes.cpp): names checked (non-empty, distinct, not numbers), stored in
// config.node_names.
void read_node_names(FieldReader& reader, PipelineConfig& config);
// After every stage was read: each stage's node_names resolved to ranks (node / node_list),
// one diagnostic per name that `nodes:` does not have.
void resolve_node_names(PipelineConfig& config, std::vector<Diagnostic>& out);

// The string a scalar node holds when it is a string (quoted, or plain text that the core
// schema types as a string); nullopt otherwise.
[[nodiscard]] std::optional<std::string> string_of(const ConfigNode& node);

// "expected X, got Y" with a hint to quote plain scalars that were meant as strings.
[[nodiscard]] std::string type_message(const ConfigNode& value, std::string_view expected);

}  // namespace omnirt::config::detail
