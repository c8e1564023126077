#include "runner/builtins.h"

#include <mutex>

#include "core/registry.h"
#include "pipeline/test_stages.h"
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
