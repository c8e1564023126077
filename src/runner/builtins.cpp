#include "runner/builtins.h"

#include <mutex>

#include "core/registry.h"
#include "relay/builtin.h"
#if __has_include("pipeline/test_stages.h")
#include "pipeline/test_stages.h"
#define OMNIRT_HAVE_TEST_STAGES 1
#endif

namespace omnirt::runner {
namespace {

Status register_all() {
    if (auto status = relay::register_builtin_backends(); !status) {
        return fail(status.error().with_context("registering the relay backends"));
    }
#if defined(OMNIRT_HAVE_TEST_STAGES)
    if (auto status = pipeline::register_test_stages(Registry::global()); !status) {
        return fail(status.error().with_context("registering the test stages"));
    }
#endif
    return ok_status();
}

}  // namespace

Status register_builtins() {
    // The registries reject a second registration of a name, so registration runs once.
    static std::once_flag once;
    static Status result;
    std::call_once(once, [] { result = register_all(); });
    return result;
}

}  // namespace omnirt::runner
