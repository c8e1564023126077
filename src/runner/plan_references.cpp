// The cross-reference checks of a decoded plan (plan_decode.cpp decodes the fields).
#include <algorithm>
#include <set>

#include "runner/plan_format.h"

namespace omnirt::runner {
namespace {

// Names must be unique, and every name that refers to a stage or process must resolve, so code
// using the plan (find_stage, find_process) can rely on it.
class References {
  public:
    explicit References(const config::RuntimePlan& plan) {
        for (const auto& s : plan.stages) stages_.insert(s.name);
        for (const auto& p : plan.processes) processes_.insert(p.name);
    }

    Status check(const config::RuntimePlan& plan) const {
        OMNI_RETURN_IF_ERROR(unique(plan.stages, "stages"));
        OMNI_RETURN_IF_ERROR(unique(plan.processes, "processes"));
        OMNI_RETURN_IF_ERROR(stage("entry_stage", plan.entry_stage));
        OMNI_RETURN_IF_ERROR(stages("terminal_stages", plan.terminal_stages));
        if (plan.node_names.size() > std::max<std::size_t>(plan.node_addresses.size(), 1)) {
            return field_error("node_names", "names " + std::to_string(plan.node_names.size()) +
                                                 " nodes, more than the plan's nodes");
        }
        for (std::size_t i = 0; i < plan.stages.size(); ++i) {
            const auto& s = plan.stages[i];
            std::string path = indexed("stages", i);
            OMNI_RETURN_IF_ERROR(process(path + ".process", s.process));
            OMNI_RETURN_IF_ERROR(node(plan, path + ".node", s.node));
            for (std::size_t j = 0; j < s.processes.size(); ++j) {
                OMNI_RETURN_IF_ERROR(process(indexed(path + ".processes", j), s.processes[j]));
            }
            using NamedList = std::pair<const char*, const std::vector<std::string>*>;
            const NamedList lists[] = {{"next", &s.next},
                                       {"wait_for", &s.wait_for},
                                       {"stream_to", &s.stream_to},
                                       {"local_targets", &s.local_targets},
                                       {"local_stream_targets", &s.local_stream_targets},
                                       {"same_gpu_stream_targets", &s.same_gpu_stream_targets},
                                       {"stream_sources", &s.stream_sources}};
            for (const auto& [name, list] : lists) {
                OMNI_RETURN_IF_ERROR(stages(path + "." + name, *list));
            }
        }
        for (std::size_t i = 0; i < plan.processes.size(); ++i) {
            const auto& p = plan.processes[i];
            std::string path = indexed("processes", i);
            OMNI_RETURN_IF_ERROR(stages(path + ".stages", p.stages));
            OMNI_RETURN_IF_ERROR(node(plan, path + ".node", p.node));
            if (p.tp) OMNI_RETURN_IF_ERROR(stage(path + ".tp.stage", p.tp->stage));
            // A replica process binds its stages' endpoints of its replica index.
            for (const auto& name : p.stages) {
                const config::StagePlan* hosted = plan.find_stage(name);
                if (hosted != nullptr && std::max(hosted->replicas, 1) != p.replicas) {
                    return field_error(path + ".replicas",
                                       "process " + quoted(p.name) + " has " +
                                           std::to_string(p.replicas) + " replicas, stage " +
                                           quoted(name) + " " + std::to_string(hosted->replicas));
                }
            }
        }
        for (std::size_t i = 0; i < plan.edges.size(); ++i) {
            std::string path = indexed("edges", i);
            OMNI_RETURN_IF_ERROR(stage(path + ".from", plan.edges[i].from));
            OMNI_RETURN_IF_ERROR(stage(path + ".to", plan.edges[i].to));
        }
        return ok_status();
    }

  private:
    template <class T>
    static Status unique(const std::vector<T>& items, const std::string& path) {
        std::set<std::string, std::less<>> seen;
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (!seen.insert(items[i].name).second) {
                return field_error(indexed(path, i) + ".name",
                                   "duplicate name " + quoted(items[i].name));
            }
        }
        return ok_status();
    }

    Status stage(const std::string& path, const std::string& name) const {
        if (stages_.contains(name)) return ok_status();
        return field_error(path, "unknown stage " + quoted(name));
    }

    Status stages(const std::string& path, const std::vector<std::string>& names) const {
        for (std::size_t i = 0; i < names.size(); ++i) {
            OMNI_RETURN_IF_ERROR(stage(indexed(path, i), names[i]));
        }
        return ok_status();
    }

    // A node rank the plan has an address for (0 alone for a one-node plan).
    static Status node(const config::RuntimePlan& plan, const std::string& path, int rank) {
        const std::size_t nodes = std::max<std::size_t>(plan.node_addresses.size(), 1);
        if (rank >= 0 && static_cast<std::size_t>(rank) < nodes) return ok_status();
        return field_error(path, "node " + std::to_string(rank) + " is not one of the plan's " +
                                     std::to_string(nodes) + " nodes");
    }

    Status process(const std::string& path, const std::string& name) const {
        if (processes_.contains(name)) return ok_status();
        return field_error(path, "unknown process " + quoted(name));
    }

    std::set<std::string, std::less<>> stages_;
    std::set<std::string, std::less<>> processes_;
};

}  // namespace

Status check_plan_references(const config::RuntimePlan& plan) {
    return References(plan).check(plan);
}

}  // namespace omnirt::runner
