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

// `node: R` (every process of the stage on rank R) or `node: [R0, R1, ...]` (replica k on Rk;
// validation checks the count against `replicas`).
void read_node(FieldReader& reader, StageConfig& stage) {
    const ConfigNode* value = reader.find("node");
    if (value == nullptr || scalar_type(*value) == ScalarType::null) return;
    auto read_rank = [&](const ConfigNode& node, std::string_view key) -> std::optional<int> {
        if (!node.is_scalar() || scalar_type(node) != ScalarType::integer) {
            reader.wrong_type(node, key,
                              key == "node" ? "an integer or a list of integers" : "an integer");
            return std::nullopt;
        }
        auto converted = to_value(node);
        if (!converted) {
            reader.report(node.location, key, converted.error().message);
            return std::nullopt;
        }
        return narrow_to_int(reader, node, key, converted->as_int());
    };
    if (!value->is_sequence()) {
        stage.node = read_rank(*value, "node");
        return;
    }
    std::vector<int> ranks;
    for (std::size_t i = 0; i < value->items.size(); ++i) {
        std::string key = "node[" + std::to_string(i) + "]";
        reader.locations()[key] = value->items[i].location;
        auto rank = read_rank(value->items[i], key);
        if (!rank) return;
        ranks.push_back(*rank);
    }
    if (ranks.empty()) {
        reader.report(value->location, "node",
                      "node: [] names no node; give one node rank, or one per replica");
        return;
    }
    stage.node = ranks.front();
    stage.replica_nodes = std::move(ranks);
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
