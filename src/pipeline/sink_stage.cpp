#include "pipeline/sink_stage.h"

#include "pipeline/test_stages.h"

namespace omnirt::pipeline {
namespace {

std::int64_t tensor_bytes(const Value& value) {
    if (const Tensor* tensor = value.if_tensor()) return static_cast<std::int64_t>(tensor->nbytes());
    std::int64_t total = 0;
    if (const List* list = value.if_list()) {
        for (const auto& item : *list) total += tensor_bytes(item);
    } else if (const Map* map = value.if_map()) {
        for (const auto& [key, item] : *map) total += tensor_bytes(item);
    }
    return total;
}

}  // namespace

Status register_sink_stage(Registry& registry) {
    StageFactory factory = [](const StageContext& context) -> Result<std::unique_ptr<Scheduler>> {
        return test_stages_detail::make_simple_scheduler(
            context, [](const StagePayload& input, Emitter&) -> Result<StagePayload> {
                return StagePayload{.request_id = input.request_id,
                                    .request = input.request,
                                    .data = Map{{"tensor_bytes", tensor_bytes(input.data)}}};
            });
    };
    return test_stages_detail::add_if_absent(
        registry, FunctionKind::factory, "test.sink",
        RegistryEntry{.callable = std::move(factory),
                      .description = "drops the input's tensors, answers {tensor_bytes}"});
}

}  // namespace omnirt::pipeline
