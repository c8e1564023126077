// test.sink (test_stages.h).
#include "testing/test_stages_internal.h"

namespace omnirt::testing {
namespace {

std::int64_t tensor_bytes(const Value& value) {
    if (const Tensor* tensor = value.if_tensor())
        return static_cast<std::int64_t>(tensor->nbytes());
    std::int64_t total = 0;
    if (const List* list = value.if_list()) {
        for (const auto& item : *list) total += tensor_bytes(item);
    } else if (const Map* map = value.if_map()) {
        for (const auto& [key, item] : *map) total += tensor_bytes(item);
    }
    return total;
}

}  // namespace

namespace test_stages_detail {

Status register_sink_stage(Registry& registry) {
    StageFactory factory = [](const StageContext& context) -> Result<std::unique_ptr<Scheduler>> {
        return make_simple_scheduler(
            context, [](const StagePayload& input, Emitter&) -> Result<StagePayload> {
                return StagePayload{.request_id = input.request_id,
                                    .request = input.request,
                                    .data = Map{{"tensor_bytes", tensor_bytes(input.data)}}};
            });
    };
    return registry.add_if_absent(
        FunctionKind::factory, "test.sink",
        RegistryEntry{.callable = std::move(factory),
                      .description = "drops the input's tensors, answers {tensor_bytes}"});
}

}  // namespace test_stages_detail

}  // namespace omnirt::testing
