#include "runner/builtins.h"

#include <mutex>

#include "core/registry.h"
#include "models/builtin_families.h"
#include "pipeline/demo_stages.h"
#include "pipeline/sink_stage.h"
#include "pipeline/test_stages.h"
#include "pipeline/tp_test_stage.h"
#include "relay/builtin.h"

namespace omnirt::runner {
namespace {

Status register_all() {
    if (auto status = relay::register_builtin_backends(); !status) {
        return fail(status.error().with_context("registering the relay backends"));
    }
    if (auto status = pipeline::register_test_stages(Registry::global()); !status) {
        return fail(status.error().with_context("registering the test stages"));
    }
    if (auto status = pipeline::register_demo_stages(Registry::global()); !status) {
        return fail(status.error().with_context("registering the demo stages"));
    }
    if (auto status = pipeline::register_sink_stage(); !status) {
        return fail(status.error().with_context("registering test.sink"));
    }
    if (auto status = pipeline::register_tp_test_stage(); !status) {
        return fail(status.error().with_context("registering test.rank_log"));
    }
    if (auto status = models::register_family_stages(); !status) {
        return fail(status.error());
    }
    return ok_status();
}

}  // namespace

Status register_builtins() {
    // Runs once; later calls (from any thread) return the first call's result.
    static std::once_flag once;
    static Status result;
    std::call_once(once, [] { result = register_all(); });
    return result;
}

}  // namespace omnirt::runner
