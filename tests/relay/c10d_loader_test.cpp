// Loading the c10d relay backends on demand (relay/c10d_loader.h): where the plugin is looked
// for, every way loading one can fail (fake plugins), the once-per-process path create_relay
// takes (in a fresh process each: death tests re-run this binary), and the real plugin creating
// gloo relays that move bytes. This binary does not link libtorch or omnirt_relay_gloo.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "config/runtime_dir.h"
#include "relay/c10d_loader.h"
#include "relay/registry.h"
#include "support/threads.h"

#ifndef OMNIRT_TEST_C10D_PLUGIN
#define OMNIRT_TEST_C10D_PLUGIN ""  // this build has no libtorch-based plugin
#endif

namespace omnirt::relay {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr Duration kGuard = 60s;  // hang guard only

// Keeps OMNIRT_C10D_PLUGIN as the test found it. setenv runs before the test starts threads.
class ScopedPluginEnv {
  public:
    explicit ScopedPluginEnv(const char* value) {
        if (const char* old = std::getenv(kC10dPluginPathEnv)) saved_ = old;
        set(value);
    }
    ~ScopedPluginEnv() { set(saved_ ? saved_->c_str() : nullptr); }

  private:
    static void set(const char* value) {
        if (value == nullptr) {
            unsetenv(kC10dPluginPathEnv);
        } else {
            setenv(kC10dPluginPathEnv, value, 1);
        }
    }
    std::optional<std::string> saved_;
};

bool is_registered(const std::string& name) {
    auto names = registered_backends();
    return std::find(names.begin(), names.end(), name) != names.end();
}

RelayOptions gloo_options(const std::string& dir, std::int64_t rank, std::int64_t world) {
    return RelayOptions{.backend = "gloo",
                        .name = "rank" + std::to_string(rank),
                        .runtime_dir = dir,
                        .rank = rank,
                        .world_size = world,
                        .rendezvous = "file://" + dir + "/store"};
}

std::unique_ptr<config::RuntimeDirectory> temp_dir() {
    auto dir = config::RuntimeDirectory::create("/tmp");
    OMNI_CHECK(dir.has_value(), "cannot create a runtime directory");
    return std::move(*dir);
}

TEST(C10dPluginPath, EnvironmentWinsOverTheBuildPath) {
    {
        ScopedPluginEnv env(nullptr);
        EXPECT_EQ(c10d_plugin_path(), OMNIRT_TEST_C10D_PLUGIN);
    }
    {
        ScopedPluginEnv env("");  // empty means unset
        EXPECT_EQ(c10d_plugin_path(), OMNIRT_TEST_C10D_PLUGIN);
    }
    {
        ScopedPluginEnv env("/opt/elsewhere/libomnirt_c10d_plugin.so");
        EXPECT_EQ(c10d_plugin_path(), "/opt/elsewhere/libomnirt_c10d_plugin.so");
    }
}

TEST(C10dPluginLoad, MissingFileNamesThePathTheReasonAndTheFix) {
    auto dir = temp_dir();
    const std::string path = dir->path() + "/libomnirt_c10d_plugin.so";
    auto status = load_c10d_plugin(path);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::unimplemented);
    EXPECT_THAT(status.error().message, HasSubstr("'" + path + "' could not be loaded"));
    EXPECT_THAT(status.error().message, HasSubstr("No such file or directory"));  // dlerror
    EXPECT_THAT(status.error().message, HasSubstr("libtorch-based c10d plugin"));
    EXPECT_THAT(status.error().message, HasSubstr("OMNIRT_C10D_PLUGIN"));
}

TEST(C10dPluginLoad, EmptyPathSaysTheBuildHasNoPlugin) {
    auto status = load_c10d_plugin("");
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::unimplemented);
    EXPECT_THAT(status.error().message, HasSubstr("built without the c10d plugin"));
}

TEST(C10dPluginLoad, RefusesFilesThatAreNotLibraries) {
    auto dir = temp_dir();
    const std::string text = dir->path() + "/plugin.so";
    std::ofstream(text) << "not an ELF file\n";
    for (const std::string& path : {text, dir->path()}) {
        auto status = load_c10d_plugin(path);
        ASSERT_FALSE(status.has_value()) << path;
        EXPECT_EQ(status.error().code, ErrorCode::unimplemented);
        EXPECT_THAT(status.error().message, HasSubstr("'" + path + "' could not be loaded: "));
    }
}

TEST(C10dPluginLoad, RefusesLibrariesWithoutTheEntryPoints) {
    for (const std::string& path :
         {std::string(OMNIRT_FAKE_C10D_PLUGIN_NO_REGISTER), std::string("libm.so.6")}) {
        auto status = load_c10d_plugin(path);
        ASSERT_FALSE(status.has_value()) << path;
        EXPECT_EQ(status.error().code, ErrorCode::failed_precondition);
        EXPECT_THAT(status.error().message,
                    HasSubstr("'" + path + "' is not an omnirt c10d plugin"));
    }
}

TEST(C10dPluginLoad, RefusesAnotherAbiVersion) {
    auto status = load_c10d_plugin(OMNIRT_FAKE_C10D_PLUGIN_BAD_ABI);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::failed_precondition);
    EXPECT_THAT(
        status.error().message,
        HasSubstr("was built for c10d plugin ABI " + std::to_string(kC10dPluginAbiVersion + 1) +
                  "; this omnirt has ABI " + std::to_string(kC10dPluginAbiVersion)));
}

TEST(C10dPluginLoad, RegistrationFailureCarriesThePluginsMessageTruncated) {
    auto status = load_c10d_plugin(OMNIRT_FAKE_C10D_PLUGIN_FAILING);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::internal);
    EXPECT_THAT(status.error().message, HasSubstr("failed to register its backends: "
                                                  "fake registration failure xxx"));
    EXPECT_LT(status.error().message.size(), 1000u) << "the plugin's 2000 characters are cut";
}

TEST(C10dPluginLoad, ConcurrentLoadsRegisterOnce) {
    // The fake fails a second registration of its backend, so every load succeeding means the
    // loader registered it exactly once.
    std::vector<std::future<Status>> loads;
    for (int i = 0; i < 8; ++i) {
        loads.push_back(std::async(std::launch::async, [] {
            return load_c10d_plugin(OMNIRT_FAKE_C10D_PLUGIN_REGISTERS);
        }));
    }
    for (auto& load : loads) {
        ASSERT_EQ(load.wait_for(kGuard), std::future_status::ready);
        auto status = load.get();
        EXPECT_TRUE(status.has_value()) << status.error().to_string();
    }
    EXPECT_TRUE(is_registered("fake-c10d"));
    auto again = load_c10d_plugin(OMNIRT_FAKE_C10D_PLUGIN_REGISTERS);
    EXPECT_TRUE(again.has_value()) << again.error().to_string();
    // Its factory is what create_relay now calls.
    auto relay = create_relay(RelayOptions{.backend = "fake-c10d"});
    ASSERT_FALSE(relay.has_value());
    EXPECT_THAT(relay.error().message, HasSubstr("fake-c10d makes no relays"));
}

// The checks of the death test below, run in its child; returns the exit code (0: all held).
int missing_plugin_checks() {
    const std::string missing = "/nonexistent/omnirt/libomnirt_c10d_plugin.so";
    setenv(kC10dPluginPathEnv, missing.c_str(), 1);
    auto dir = temp_dir();
    for (const char* backend : {"gloo", "nccl", "gloo"}) {
        RelayOptions options = gloo_options(dir->path(), 0, 1);
        options.backend = backend;
        auto relay = create_relay(options);
        const std::string expected = "relay backend '" + std::string(backend) + "': c10d plugin '" +
                                     missing + "' could not be loaded";
        if (relay.has_value() || relay.error().code != ErrorCode::unimplemented ||
            relay.error().message.find(expected) == std::string::npos ||
            relay.error().message.find("libtorch-based") == std::string::npos) {
            std::fprintf(stderr, "unexpected: %s\n",
                         relay ? "a relay" : relay.error().to_string().c_str());
            return 1;
        }
        // Naming the real plugin now changes nothing: the first result stands.
        if (OMNIRT_TEST_C10D_PLUGIN[0] != '\0') {
            setenv(kC10dPluginPathEnv, OMNIRT_TEST_C10D_PLUGIN, 1);
        }
    }
    if (is_registered("gloo")) return 2;
    std::fprintf(stderr, "checked\n");
    return 0;
}

// In a fresh process (death tests re-run this binary, so no earlier test loaded anything): a
// missing plugin makes create_relay fail with the loader's error, for gloo and nccl, and the
// failure is kept for the life of the process even when the environment changes.
TEST(C10dLazyBackendDeathTest, MissingPluginFailsCreateRelayOncePerProcess) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::exit(missing_plugin_checks()), ::testing::ExitedWithCode(0), "checked");
}

// The real plugin, loaded through create_relay by both ranks of a gloo group at once: both
// relays form the group and move bytes; nccl then says what it needs (this CPU machine).
TEST(C10dLazyBackend, RealPluginCreatesGlooRelaysThatMoveBytes) {
    if (OMNIRT_TEST_C10D_PLUGIN[0] == '\0') GTEST_SKIP() << "this build has no c10d plugin";
    ScopedPluginEnv env(nullptr);
    auto dir = temp_dir();
    // Both ranks ask for gloo concurrently; whichever comes first loads the plugin, the other
    // waits for it. Creation blocks until both ranks joined, hence one thread per rank.
    std::vector<std::future<Result<std::unique_ptr<Relay>>>> creating;
    for (std::int64_t rank = 0; rank < 2; ++rank) {
        creating.push_back(std::async(std::launch::async, [&, rank] {
            return create_relay(gloo_options(dir->path(), rank, 2));
        }));
    }
    std::vector<std::unique_ptr<Relay>> relays;
    for (auto& result : creating) {
        ASSERT_EQ(result.wait_for(kGuard), std::future_status::ready);
        auto relay = result.get();
        ASSERT_TRUE(relay.has_value()) << relay.error().to_string();
        EXPECT_EQ((*relay)->backend(), "gloo");
        relays.push_back(std::move(*relay));
    }
    EXPECT_TRUE(is_registered("gloo"));

    std::vector<std::uint8_t> bytes(4096);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7);
    Tensor sent = Tensor::from_vector(bytes);
    auto put = relays[0]->put_async(sent, "r", 1);
    ASSERT_TRUE(put.has_value()) << put.error().to_string();
    auto get = relays[1]->get_async((*put)->metadata(), Tensor{}, "r");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    auto received = (*get)->wait_for_completion(kGuard);
    ASSERT_TRUE(received.has_value()) << received.error().to_string();
    auto done = (*put)->wait_for_completion(kGuard);
    ASSERT_TRUE(done.has_value()) << done.error().to_string();
    Tensor got = (*get)->tensor();
    ASSERT_EQ(got.nbytes(), bytes.size());
    EXPECT_TRUE(
        std::equal(bytes.begin(), bytes.end(), reinterpret_cast<const std::uint8_t*>(got.data())));
    for (auto& relay : relays) relay->cleanup("r");
    relays.clear();

    if (!is_registered("nccl")) {
        RelayOptions nccl = gloo_options(dir->path(), 0, 1);
        nccl.backend = "nccl";
        auto relay = create_relay(nccl);
        ASSERT_FALSE(relay.has_value());
        EXPECT_EQ(relay.error().code, ErrorCode::unimplemented);
        EXPECT_THAT(relay.error().message, HasSubstr("needs a CUDA build of libtorch"));
        EXPECT_THAT(relay.error().message, Not(HasSubstr("could not be loaded")));
    }
    auto loaded = ensure_c10d_backends();
    EXPECT_TRUE(loaded.has_value()) << loaded.error().to_string();
}

// Relays made through the plugin leave no threads behind once closed (the plugin and libtorch
// themselves stay loaded, with whatever threads they keep).
TEST(C10dLazyBackend, ClosedPluginRelaysLeaveNoThreads) {
    if (OMNIRT_TEST_C10D_PLUGIN[0] == '\0') GTEST_SKIP() << "this build has no c10d plugin";
    ScopedPluginEnv env(nullptr);
    auto make_one = [] {
        auto dir = temp_dir();
        auto relay = create_relay(gloo_options(dir->path(), 0, 1));
        ASSERT_TRUE(relay.has_value()) << relay.error().to_string();
        (*relay)->close();
    };
    make_one();  // loads the plugin if no earlier test did
    const std::size_t before = omnirt::testing::process_thread_count();
    make_one();
    make_one();
    EXPECT_TRUE(omnirt::testing::thread_count_settles_to(before));
}

}  // namespace
}  // namespace omnirt::relay
