// test.rank_log (test_stages.h).
#include <fstream>

#include "testing/test_stages_internal.h"

namespace omnirt::testing {

namespace test_stages_detail {

Status register_rank_log_stage(Registry& registry) {
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
        return make_simple_scheduler(
            context, [log](const StagePayload& input, Emitter&) -> Result<StagePayload> {
                *log << input.request_id << "\n" << std::flush;
                return input;
            });
    };
    return registry.add_if_absent(
        FunctionKind::factory, "test.rank_log",
        RegistryEntry{.callable = std::move(factory),
                      .description = "appends request ids to <dir>/<stage>.rank<r>.log"});
}

}  // namespace test_stages_detail

}  // namespace omnirt::testing
