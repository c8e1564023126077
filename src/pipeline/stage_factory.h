#pragma once
// Stage factories: the registry entries a config's `factory:` names. A factory builds the
// scheduler of one stage (or of one TP rank of it) from the stage's resolved arguments.
//
// Thread safety: registration and lookup may run on any thread (core/registry.h).
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/registry.h"
#include "core/tensor.h"
#include "core/value.h"
#include "pipeline/scheduler.h"

namespace omnirt::pipeline {

struct StageContext {
    std::string stage_name;
    Map args;  // factory_args + runtime_overrides + injected model_path / gpu_id
    std::vector<std::string> next;
    std::vector<std::string> stream_to;
    std::vector<std::string> stream_sources;  // stages that stream into this one
    bool terminal = false;
    Device device = Device::cpu();
    int tp_rank = 0;
    int tp_size = 1;
    std::string tp_rendezvous;  // "file://..." or "tcp://host:port"; empty without TP
    // The address this process's node is reached at by the other nodes (a plan over several
    // nodes); empty on one node. A TP group binds its connections there.
    std::string node_address;
    // The stage's profiler; schedulers record compute and queue-wait spans on it. Never null
    // while the stage runs; outlives the scheduler.
    Tracer* tracer = nullptr;
};

using StageFactory = std::function<Result<std::unique_ptr<Scheduler>>(const StageContext&)>;

// Registers `factory` under FunctionKind::factory. `injectable_args` lists the arguments
// runtime prep may inject ("model_path", "gpu_id").
[[nodiscard]] Status register_stage_factory(std::string name, StageFactory factory,
                                            std::string description = {},
                                            std::vector<std::string> injectable_args = {},
                                            Registry& registry = Registry::global());

// not_found naming the registered factories, or invalid_argument when the name is registered
// with another signature.
[[nodiscard]] Result<StageFactory> find_stage_factory(
    std::string_view name, const Registry& registry = Registry::global());

}  // namespace omnirt::pipeline
