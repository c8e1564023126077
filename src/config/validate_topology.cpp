// Topology rules (config.md "Routing rule"): next / terminal, route_fn, fan-in, streaming,
// references to other stages, self loops, duplicates, routing cycles.
#include <algorithm>
#include <map>
#include <set>

#include "config/validate.h"

namespace omnirt::config::detail {
namespace {

using StageIndex = std::map<std::string, std::size_t>;

std::string unknown_stage(const PipelineConfig& config, const std::string& name,
                          const std::string& field) {
    return "unknown stage '" + name + "' in '" + field + "' (stages: " + stage_list(config) + ")";
}

void check_routing_rule(const PipelineConfig& config, std::size_t i, std::vector<Diagnostic>& out) {
    const StageConfig& stage = config.stages[i];
    if (!stage.next.empty() && stage.terminal) {
        report(config, i, "terminal", "set exactly one of 'next' or 'terminal: true', not both",
               out);
    } else if (stage.next.empty() && !stage.terminal) {
        report(config, i, "next",
               "set exactly one of 'next' (downstream stages) or 'terminal: true'; the stage "
               "has neither",
               out);
    }
    if (stage.route_fn && stage.next.empty()) {
        report(config, i, "route_fn",
               stage.terminal ? "'route_fn' is not valid on a terminal stage"
                              : "'route_fn' needs 'next' as the static set of its targets",
               out);
    }
    if (!stage.wait_for.empty() && !stage.merge_fn) {
        report(config, i, "wait_for", "'wait_for' needs 'merge_fn' to merge the fan-in payloads",
               out);
    }
    if (stage.merge_fn && stage.wait_for.empty()) {
        report(config, i, "merge_fn", "'merge_fn' needs 'wait_for' (the stages to merge)", out);
    }
    if (stage.wait_for_fn && stage.wait_for.empty()) {
        report(config, i, "wait_for_fn",
               "'wait_for_fn' needs 'wait_for' as the static set of its sources", out);
    }
    if (stage.stream_done_to_fn && stage.stream_to.empty()) {
        report(config, i, "stream_done_to_fn",
               "'stream_done_to_fn' needs 'stream_to' as the static set of its targets", out);
    }
}

// next / wait_for / stream_to: each entry names another existing stage, once.
void check_stage_list(const PipelineConfig& config, const StageIndex& index, std::size_t i,
                      const std::vector<std::string>& names, const std::string& field,
                      std::vector<Diagnostic>& out) {
    const StageConfig& stage = config.stages[i];
    std::set<std::string> seen;
    for (std::size_t k = 0; k < names.size(); ++k) {
        const std::string& name = names[k];
        std::string item = field + "[" + std::to_string(k) + "]";
        if (!seen.insert(name).second) {
            report(config, i, item, "'" + name + "' is listed twice in '" + field + "'", out);
        } else if (!stage.name.empty() && name == stage.name) {
            std::string what = field == "next"       ? "routes the stage to itself"
                               : field == "wait_for" ? "makes the stage wait for itself"
                                                     : "streams the stage to itself";
            report(config, i, item, "'" + field + "' " + what, out);
        } else if (!index.contains(name)) {
            report(config, i, item, unknown_stage(config, name, field), out);
        }
    }
}

void check_references(const PipelineConfig& config, const StageIndex& index, std::size_t i,
                      std::vector<Diagnostic>& out) {
    const StageConfig& stage = config.stages[i];
    check_stage_list(config, index, i, stage.next, "next", out);
    check_stage_list(config, index, i, stage.wait_for, "wait_for", out);
    check_stage_list(config, index, i, stage.stream_to, "stream_to", out);
    for (const auto& [target, function] : stage.project_payload) {
        std::string field = "project_payload." + target;
        if (!index.contains(target)) {
            report(config, i, field, unknown_stage(config, target, "project_payload"), out);
        } else if (std::find(stage.next.begin(), stage.next.end(), target) == stage.next.end()) {
            report(config, i, field,
                   "project_payload target '" + target + "' is not among the 'next' targets", out);
        }
    }
    // Each wait_for source must route here, or the fan-in never completes.
    for (std::size_t k = 0; k < stage.wait_for.size(); ++k) {
        auto source = index.find(stage.wait_for[k]);
        if (source == index.end() || source->second == i) continue;
        const auto& source_next = config.stages[source->second].next;
        if (std::find(source_next.begin(), source_next.end(), stage.name) == source_next.end()) {
            report(config, i, "wait_for[" + std::to_string(k) + "]",
                   "wait_for source '" + stage.wait_for[k] + "' does not route to '" + stage.name +
                       "'; add it to the 'next' of '" + stage.wait_for[k] + "'",
                   out);
        }
    }
}

// Depth-first search over `next` edges; every back edge closes one cycle.
class CycleFinder {
  public:
    CycleFinder(const PipelineConfig& config, const StageIndex& index, std::vector<Diagnostic>& out)
        : config_(config), index_(index), out_(out), color_(config.stages.size(), kWhite) {}

    void run() {
        for (std::size_t i = 0; i < config_.stages.size(); ++i) {
            if (color_[i] == kWhite) visit(i);
        }
    }

  private:
    static constexpr int kWhite = 0, kGrey = 1, kBlack = 2;
    static constexpr int kMaxReportedCycles = 32;

    // Iterative, so that a long chain of stages cannot exhaust the stack.
    void visit(std::size_t root) {
        std::vector<std::pair<std::size_t, std::size_t>> frames;  // stage, next edge to follow
        color_[root] = kGrey;
        path_.push_back(root);
        frames.emplace_back(root, 0);
        while (!frames.empty()) {
            auto& [i, edge] = frames.back();
            const auto& next = config_.stages[i].next;
            if (edge == next.size()) {
                color_[i] = kBlack;
                path_.pop_back();
                frames.pop_back();
                continue;
            }
            auto it = index_.find(next[edge++]);
            if (it == index_.end() || it->second == i) continue;  // reported elsewhere
            std::size_t j = it->second;
            if (color_[j] == kGrey) {
                report_cycle(j);
            } else if (color_[j] == kWhite) {
                color_[j] = kGrey;
                path_.push_back(j);
                frames.emplace_back(j, 0);
            }
        }
    }

    void report_cycle(std::size_t start) {
        if (++cycles_ > kMaxReportedCycles) {
            if (cycles_ == kMaxReportedCycles + 1) {
                report(config_, "stages", "more routing cycles through 'next' not listed", out_);
            }
            return;
        }
        auto begin = std::find(path_.begin(), path_.end(), start);
        std::vector<std::size_t> cycle(begin, path_.end());
        // Name the cycle from its first stage in file order, so each cycle reads one way.
        std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
        std::string text;
        for (std::size_t k : cycle) text += config_.stages[k].name + " -> ";
        text += config_.stages[cycle.front()].name;
        report(config_, cycle.front(), "next", "routing cycle through 'next': " + text, out_);
    }

    const PipelineConfig& config_;
    const StageIndex& index_;
    std::vector<Diagnostic>& out_;
    std::vector<int> color_;
    std::vector<std::size_t> path_;
    int cycles_ = 0;
};

}  // namespace

void validate_topology(const PipelineConfig& config, std::vector<Diagnostic>& out) {
    StageIndex index;
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        if (!config.stages[i].name.empty()) index.emplace(config.stages[i].name, i);
    }
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        check_routing_rule(config, i, out);
        check_references(config, index, i, out);
    }
    for (const auto& [stage, overrides] : config.runtime_overrides) {
        if (!index.contains(stage)) {
            report(config, "runtime_overrides." + stage,
                   unknown_stage(config, stage, "runtime_overrides"), out);
        }
    }
    CycleFinder(config, index, out).run();
}

}  // namespace omnirt::config::detail
