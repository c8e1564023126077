// parse_stage (config/load.h): one element of `stages:` -> StageConfig.
#include <climits>

#include "config/load.h"
#include "config/parse_fields.h"

namespace omnirt::config {
namespace {

using detail::FieldReader;

std::optional<int> narrow_to_int(FieldReader& reader, const ConfigNode& node, std::string_view key,
                                 std::int64_t value) {
    if (value < INT_MIN || value > INT_MAX) {
        reader.report(node.location, key, "integer " + node.text + " is out of range");
        return std::nullopt;
    }
    return static_cast<int>(value);
}

// `gpu: N` (one GPU) or `gpu: [N, ...]` (one GPU per TP rank); null means CPU placement.
void read_gpu(FieldReader& reader, StageConfig& stage) {
    const ConfigNode* value = reader.find("gpu");
    if (value == nullptr || scalar_type(*value) == ScalarType::null) return;
    constexpr std::string_view kExpected = "an integer or a list of integers";
    auto read_id = [&](const ConfigNode& node, std::string_view key) -> std::optional<int> {
        if (!node.is_scalar() || scalar_type(node) != ScalarType::integer) {
            reader.wrong_type(node, key, key == "gpu" ? kExpected : "an integer");
            return std::nullopt;
        }
        auto converted = to_value(node);
        if (!converted) {
            reader.report(node.location, key, converted.error().message);
            return std::nullopt;
        }
        return narrow_to_int(reader, node, key, converted->as_int());
    };
    if (value->is_sequence()) {
        std::vector<int> ids;
        bool ok = true;
        for (std::size_t i = 0; i < value->items.size(); ++i) {
            std::string key = "gpu[" + std::to_string(i) + "]";
            reader.locations()[key] = value->items[i].location;
            auto id = read_id(value->items[i], key);
            if (id) {
                ids.push_back(*id);
            } else {
                ok = false;
            }
        }
        if (ok) {
            stage.gpu = std::move(ids);
            stage.gpu_is_list = true;
        }
        return;
    }
    if (auto id = read_id(*value, "gpu")) stage.gpu = {*id};
}

// `node: R` (every process of the stage on rank R) or `node: [R0, R1, ...]` (replica k, or TP
// rank k, on Rk; validation checks the count). An entry may be a node name of the pipeline's
// `nodes:` list instead of a rank (all of a list's entries, or none): the names go to
// node_names and parse_pipeline resolves them (detail::resolve_node_names).
void read_node(FieldReader& reader, StageConfig& stage) {
    const ConfigNode* value = reader.find("node");
    if (value == nullptr || scalar_type(*value) == ScalarType::null) return;
    constexpr std::string_view kExpected = "a node rank, a node name, or a list of them";
    // An entry: a rank, or a name (nullopt after a diagnostic).
    struct Entry {
        std::optional<int> rank;
        std::string name;
    };
    auto read_entry = [&](const ConfigNode& node, std::string_view key) -> std::optional<Entry> {
        if (auto name = detail::string_of(node); name && node.is_scalar()) {
            return Entry{.name = *name};
        }
        if (!node.is_scalar() || scalar_type(node) != ScalarType::integer) {
            reader.wrong_type(node, key, key == "node" ? kExpected : "a node rank or a node name");
            return std::nullopt;
        }
        auto converted = to_value(node);
        if (!converted) {
            reader.report(node.location, key, converted.error().message);
            return std::nullopt;
        }
        auto rank = narrow_to_int(reader, node, key, converted->as_int());
        if (!rank) return std::nullopt;
        return Entry{.rank = rank};
    };
    if (!value->is_sequence()) {
        auto entry = read_entry(*value, "node");
        if (!entry) return;
        if (entry->rank) {
            stage.node = entry->rank;
        } else {
            stage.node_names = {entry->name};
        }
        return;
    }
    std::vector<int> ranks;
    std::vector<std::string> names;
    for (std::size_t i = 0; i < value->items.size(); ++i) {
        std::string key = "node[" + std::to_string(i) + "]";
        reader.locations()[key] = value->items[i].location;
        auto entry = read_entry(value->items[i], key);
        if (!entry) return;
        if (entry->rank) {
            ranks.push_back(*entry->rank);
        } else {
            names.push_back(entry->name);
        }
    }
    if (ranks.empty() && names.empty()) {
        reader.report(value->location, "node",
                      "node: [] names no node; give one node, or one per replica or TP rank");
        return;
    }
    if (!ranks.empty() && !names.empty()) {
        reader.report(value->location, "node",
                      "node mixes node ranks and node names; give every entry as a name of "
                      "`nodes:`, or every entry as a rank");
        return;
    }
    stage.node_list_written = true;
    if (!names.empty()) {
        stage.node_names = std::move(names);
        return;
    }
    stage.node = ranks.front();
    stage.node_list = std::move(ranks);
}

std::optional<RelayConfig> read_relay(FieldReader& stage_reader, StageConfig& stage) {
    const ConfigNode* value = stage_reader.find("relay");
    if (value == nullptr || value->is_null()) return std::nullopt;
    if (!value->is_map()) {
        stage_reader.wrong_type(*value, "relay", "a map");
        return std::nullopt;
    }
    FieldReader reader(*value, stage_reader.stage(), "relay.", stage.field_locations,
                       stage_reader.diagnostics());
    reader.reject_unknown_keys({"slot_size_mb", "credits", "rank", "world_size", "device"});
    RelayConfig relay;
    relay.slot_size_mb = reader.number("slot_size_mb");
    relay.credits = reader.integer("credits");
    relay.rank = reader.integer("rank");
    relay.world_size = reader.integer("world_size");
    relay.device = reader.string("device");
    return relay;
}

}  // namespace

StageConfig parse_stage(const ConfigNode& node, std::size_t index,
                        std::vector<Diagnostic>& diagnostics) {
    StageConfig stage;
    stage.location = node.location;
    std::string display = "stages[" + std::to_string(index) + "]";
    if (!node.is_map()) {
        diagnostics.push_back(
            Diagnostic{node.location, display, "", detail::type_message(node, "a stage (a map)")});
        return stage;
    }
    // Read the name first so that every other diagnostic can name the stage.
    if (const ConfigNode* name = node.find("name")) {
        auto text = detail::string_of(*name);
        if (text && !text->empty()) display = *text;
    }
    FieldReader reader(node, display, "", stage.field_locations, diagnostics);
    reader.reject_unknown_keys({"name",
                                "factory",
                                "factory_args",
                                "next",
                                "terminal",
                                "route_fn",
                                "gpu",
                                "tp_size",
                                "process",
                                "wait_for",
                                "wait_for_fn",
                                "merge_fn",
                                "stream_to",
                                "stream_done_to_fn",
                                "project_payload",
                                "relay",
                                "gpu_memory_fraction",
                                "fan_in_timeout_s",
                                "replicas",
                                "node"});
    reader.require("name");
    reader.require("factory");

    if (auto name = reader.string("name", false)) stage.name = *name;
    if (auto factory = reader.string("factory", false)) stage.factory = *factory;
    if (auto args = reader.value_map("factory_args")) stage.factory_args = std::move(*args);
    if (auto next = reader.string_list("next", /*allow_single=*/true)) {
        stage.next = std::move(*next);
        if (stage.next.empty()) {
            reader.report(stage.location_of("next"), "next",
                          "'next: []' routes nowhere; list at least one stage, or remove 'next' "
                          "and set 'terminal: true' for a final stage");
        }
    }
    if (auto terminal = reader.boolean("terminal", false)) stage.terminal = *terminal;
    stage.route_fn = reader.string("route_fn");
    read_gpu(reader, stage);
    if (auto tp_size = reader.integer("tp_size", false)) {
        if (auto narrowed = narrow_to_int(reader, *node.find("tp_size"), "tp_size", *tp_size)) {
            stage.tp_size = *narrowed;
        }
    }
    stage.process = reader.string("process");
    if (auto wait_for = reader.string_list("wait_for")) stage.wait_for = std::move(*wait_for);
    stage.wait_for_fn = reader.string("wait_for_fn");
    stage.merge_fn = reader.string("merge_fn");
    if (auto stream_to = reader.string_list("stream_to")) stage.stream_to = std::move(*stream_to);
    stage.stream_done_to_fn = reader.string("stream_done_to_fn");
    if (auto projections = reader.string_map("project_payload")) {
        stage.project_payload = std::move(*projections);
    }
    stage.relay = read_relay(reader, stage);
    stage.gpu_memory_fraction = reader.number("gpu_memory_fraction");
    if (auto timeout = reader.number("fan_in_timeout_s", false)) stage.fan_in_timeout_s = *timeout;
    if (auto replicas = reader.integer("replicas", false)) {
        if (auto narrowed = narrow_to_int(reader, *node.find("replicas"), "replicas", *replicas)) {
            stage.replicas = *narrowed;
        }
    }
    read_node(reader, stage);
    return stage;
}

}  // namespace omnirt::config
