#include "config/plugins.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace omnirt::config {
namespace {

TEST(Plugins, LoadsAndRegisters) {
    Registry registry;
    ASSERT_TRUE(load_plugins({OMNIRT_TEST_PLUGIN_PATH}, registry).has_value());
    EXPECT_TRUE(registry.contains(FunctionKind::route, "plugin_test.route"));
    auto factory = registry.find(FunctionKind::factory, "plugin_test.factory");
    ASSERT_TRUE(factory.has_value());
    EXPECT_EQ(factory->injectable_args, (std::vector<std::string>{"model_path", "gpu_id"}));
    auto route = registry.get<RouteFn>(FunctionKind::route, "plugin_test.route");
    ASSERT_TRUE(route.has_value());
    EXPECT_EQ((*route)("r", StagePayload{})->front(), "next");
    // Loading the same plugin into the same registry again is a no-op, not a duplicate error.
    EXPECT_TRUE(load_plugins({OMNIRT_TEST_PLUGIN_PATH}, registry).has_value());
}

TEST(Plugins, MissingFileIsAClearError) {
    Registry registry;
    auto status = load_plugins({"/nonexistent/libnothing.so"}, registry);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().message, "plugin '/nonexistent/libnothing.so' does not exist");
}

TEST(Plugins, NonLibraryAndNonPluginAreRejected) {
    Registry registry;
    auto status = load_plugins({"/etc/hostname"}, registry);
    ASSERT_FALSE(status.has_value());
    EXPECT_NE(status.error().message.find("could not be loaded"), std::string::npos);
    // A real shared library that is not an omnirt plugin.
    status = load_plugins({"/lib/x86_64-linux-gnu/libm.so.6"}, registry);
    ASSERT_FALSE(status.has_value());
    EXPECT_NE(status.error().message.find("is not an omnirt plugin"), std::string::npos);
}

TEST(Plugins, RegistrationFailureCarriesThePluginsMessage) {
    Registry registry;
    setenv("OMNIRT_TEST_PLUGIN_FAIL", "1", 1);
    auto status = load_plugins({OMNIRT_TEST_PLUGIN_PATH}, registry);
    unsetenv("OMNIRT_TEST_PLUGIN_FAIL");
    ASSERT_FALSE(status.has_value());
    EXPECT_NE(status.error().message.find("asked to fail by OMNIRT_TEST_PLUGIN_FAIL"),
              std::string::npos);
}

}  // namespace
}  // namespace omnirt::config
