#include "runner/builtins.h"

#include <cstdlib>
#include <mutex>
#include <string>

#include "core/registry.h"
#include "demo/demo_stages.h"
#include "models/builtin_families.h"
#include "relay/builtin.h"
#include "testing/test_stages.h"

namespace omnirt::runner {
namespace {

Status register_test_stages() {
    if (auto status = testing::register_test_stages(Registry::global()); !status) {
        return fail(status.error().with_context("registering the test stages"));
    }
    return ok_status();
}

Status register_all() {
    if (auto status = relay::register_builtin_backends(); !status) {
        return fail(status.error().with_context("registering the relay backends"));
    }
    if (auto status = demo::register_demo_stages(Registry::global()); !status) {
        return fail(status.error().with_context("registering the demo stages"));
    }
    if (auto status = models::register_family_stages(); !status) {
        return fail(status.error());
    }
    if (test_stages_enabled()) return register_test_stages();
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

bool test_stages_enabled() {
    const char* value = std::getenv(kTestStagesEnv);
    return value != nullptr && std::string_view(value) == "1";
}

Status enable_test_stages() {
    if (!test_stages_enabled() && setenv(kTestStagesEnv, "1", 1) != 0) {
        return fail(ErrorCode::internal, "cannot set " + std::string(kTestStagesEnv) + "=1");
    }
    return register_test_stages();
}

}  // namespace omnirt::runner
