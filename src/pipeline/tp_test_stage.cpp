#include "pipeline/tp_test_stage.h"

#include <fstream>

#include "pipeline/test_stages.h"

namespace omnirt::pipeline {

Status register_tp_test_stage(Registry& registry) {
    StageFactory factory = [](const StageContext& context) -> Result<std::unique_ptr<Scheduler>> {
        OMNI_TRY(std::string dir, string_arg(context, "dir", ""));
        if (dir.empty()) {
            return fail(ErrorCode::invalid_argument,
                        "stage '" + context.stage_name + "': test.rank_log needs arg dir");
        }
        std::string path =
            dir + "/" + context.stage_name + ".rank" + std::to_string(context.tp_rank) + ".log";
        auto log = std::make_shared<std::ofstream>(path, std::ios::app);
        if (!*log) return fail(ErrorCode::unavailable, "test.rank_log: cannot open " + path);
        return test_stages_detail::make_simple_scheduler(
            context, [log](const StagePayload& input, Emitter&) -> Result<StagePayload> {
                *log << input.request_id << "\n" << std::flush;
                return input;
            });
    };
    return test_stages_detail::add_if_absent(
        registry, FunctionKind::factory, "test.rank_log",
        RegistryEntry{.callable = std::move(factory),
                      .description = "appends request ids to <dir>/<stage>.rank<r>.log"});
}

}  // namespace omnirt::pipeline
