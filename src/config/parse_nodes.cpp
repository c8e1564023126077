// Node names (docs/multi_node.md "Node names"): the pipeline's `nodes:` list, and the names a
// stage's `node:` gives, resolved to ranks.
#include <algorithm>
#include <set>

#include "config/parse_fields.h"

namespace omnirt::config::detail {
namespace {

// Letters, digits, '.', '_', '-', not only digits (a name that reads as a rank would be
// ambiguous in `node:`), at most 63 characters (a DNS label's length).
std::string name_problem(const std::string& name) {
    if (name.empty()) return "a node name must not be empty";
    if (name.size() > 63) return "node name '" + name.substr(0, 63) + "...' is over 63 characters";
    for (char c : name) {
        const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                             (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!allowed) {
            return "node name '" + name +
                   "' has a character outside letters, digits, '.', '_' and '-'";
        }
    }
    if (name.find_first_not_of("0123456789") == std::string::npos) {
        return "node name '" + name + "' is a number; a name must not read as a node rank";
    }
    return {};
}

std::string names_text(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
    return out;
}

}  // namespace

void read_node_names(FieldReader& reader, PipelineConfig& config) {
    auto names = reader.string_list("nodes");
    if (!names) return;
    const ConfigNode* value = reader.find("nodes");
    if (names->empty()) {
        reader.report(value->location, "nodes",
                      "nodes: [] names no node; list a name per node rank, or remove `nodes`");
        return;
    }
    if (names->size() > static_cast<std::size_t>(kMaxNodeRank) + 1) {
        reader.report(value->location, "nodes",
                      "nodes lists " + std::to_string(names->size()) + " names; at most " +
                          std::to_string(kMaxNodeRank + 1) + " nodes");
        return;
    }
    bool ok = true;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < names->size(); ++i) {
        const std::string& name = (*names)[i];
        const std::string field = "nodes[" + std::to_string(i) + "]";
        std::string problem = name_problem(name);
        if (problem.empty() && !seen.insert(name).second) {
            problem = "node name '" + name + "' is given twice; each node needs its own name";
        }
        if (!problem.empty()) {
            reader.report(value->items[i].location, field, problem);
            ok = false;
        }
    }
    if (ok) config.node_names = std::move(*names);
}

void resolve_node_names(PipelineConfig& config, std::vector<Diagnostic>& out) {
    for (std::size_t s = 0; s < config.stages.size(); ++s) {
        StageConfig& stage = config.stages[s];
        if (stage.node_names.empty()) continue;
        const std::string display =
            stage.name.empty() ? "stages[" + std::to_string(s) + "]" : stage.name;
        std::vector<int> ranks;
        for (std::size_t k = 0; k < stage.node_names.size(); ++k) {
            const std::string& name = stage.node_names[k];
            const std::string field =
                stage.node_list_written ? "node[" + std::to_string(k) + "]" : "node";
            std::string problem;
            if (config.node_names.empty()) {
                problem = "node '" + name +
                          "' is a node name, but the pipeline has no `nodes:` list naming its "
                          "nodes (add `nodes: [...]`, or give the node rank)";
            } else {
                const auto found =
                    std::find(config.node_names.begin(), config.node_names.end(), name);
                if (found == config.node_names.end()) {
                    problem = "node '" + name + "' is not in nodes (" +
                              names_text(config.node_names) + ")";
                } else {
                    ranks.push_back(static_cast<int>(found - config.node_names.begin()));
                }
            }
            if (!problem.empty()) {
                out.push_back(Diagnostic{stage.location_of(field), display, field, problem});
            }
        }
        if (ranks.size() != stage.node_names.size()) continue;  // reported; placement unset
        stage.node = ranks.front();
        if (stage.node_list_written) stage.node_list = std::move(ranks);
    }
}

}  // namespace omnirt::config::detail
