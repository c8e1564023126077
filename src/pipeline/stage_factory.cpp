#include "pipeline/stage_factory.h"

namespace omnirt::pipeline {

Status register_stage_factory(std::string name, StageFactory factory, std::string description,
                              std::vector<std::string> injectable_args, Registry& registry) {
    return registry.add(FunctionKind::factory, std::move(name),
                        RegistryEntry{.callable = std::move(factory),
                                      .injectable_args = std::move(injectable_args),
                                      .description = std::move(description)});
}

Result<StageFactory> find_stage_factory(std::string_view name, const Registry& registry) {
    return registry.get<StageFactory>(FunctionKind::factory, name);
}

}  // namespace omnirt::pipeline
