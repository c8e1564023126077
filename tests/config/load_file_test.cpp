// Loading from files: missing and unreadable files, plugins resolved against the config's
// directory and loaded into the registry of LoadOptions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/load.h"
#include "pipeline_text.h"

namespace omnirt::config {
namespace {

namespace fs = std::filesystem;
using testing::PipelineText;

class TempDir {
  public:
    TempDir()
        : path_(fs::path(::testing::TempDir()) /
                ("omnirt-load-" + std::to_string(::getpid()) + "-" + std::to_string(++count_))) {
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~TempDir() { fs::remove_all(path_); }
    std::string write(const std::string& name, const std::string& text) const {
        fs::path file = path_ / name;
        fs::create_directories(file.parent_path());
        std::ofstream(file) << text;
        return file.string();
    }
    const fs::path& path() const { return path_; }

  private:
    static inline int count_ = 0;
    fs::path path_;
};

TEST(LoadFile, ReadsAFile) {
    TempDir dir;
    std::string path = dir.write("p.yaml", PipelineText::linear().text());
    auto config = load_pipeline_file(path, {.load_plugins = false, .check_registry = false});
    ASSERT_TRUE(config.has_value()) << config.error().message;
    EXPECT_EQ(config->source, path);
    EXPECT_EQ(config->stages[0].location.source, path);
}

TEST(LoadFile, MissingFileNamesThePath) {
    auto config = load_pipeline_file("/nonexistent/p.yaml");
    ASSERT_FALSE(config.has_value());
    EXPECT_EQ(config.error().code, ErrorCode::not_found);
    EXPECT_EQ(config.error().message,
              "cannot read config file '/nonexistent/p.yaml': No such file or directory");
    auto report = load_pipeline_report("/nonexistent/p.yaml");
    ASSERT_EQ(report.diagnostics.size(), 1u);
    EXPECT_EQ(report.diagnostics[0].to_string(),
              "/nonexistent/p.yaml: cannot read config file: No such file or directory");
    TempDir dir;
    EXPECT_NE(load_pipeline_file(dir.path().string()).error().message.find("it is a directory"),
              std::string::npos);
}

// A plugin load is remembered per (path, registry): one registry for the whole binary.
Registry& plugin_registry() {
    static Registry* registry = new Registry;
    return *registry;
}

TEST(LoadFile, PluginsResolveRelativeToTheConfigAndRegisterTheirNames) {
    TempDir dir;
    fs::create_directories(dir.path() / "lib");
    fs::copy_file(OMNIRT_TEST_PLUGIN_PATH, dir.path() / "lib" / "test_plugin.so");
    auto p = PipelineText::linear()
                 .top("plugins", "[lib/test_plugin.so]")
                 .set("a", "factory", "plugin_test.factory")
                 .set("b", "factory", "plugin_test.factory")
                 .set("c", "factory", "plugin_test.factory")
                 .set("a", "route_fn", "plugin_test.route");
    std::string path = dir.write("conf/../p.yaml", p.text());
    auto config = load_pipeline_file(path, {.registry = &plugin_registry()});
    ASSERT_TRUE(config.has_value()) << config.error().message;
    EXPECT_EQ(config->plugins,
              std::vector<std::string>{(dir.path() / "lib/test_plugin.so").string()});
    EXPECT_TRUE(plugin_registry().contains(FunctionKind::route, "plugin_test.route"));
}

TEST(LoadFile, MissingPluginIsReportedAtItsLine) {
    TempDir dir;
    auto p = PipelineText::linear().top("plugins", "[nothere.so]");
    std::string path = dir.write("p.yaml", p.text());
    Registry registry;
    auto report = load_pipeline_report(path, {.registry = &registry});
    ASSERT_EQ(report.diagnostics.size(), 1u) << testing::dump(report);
    const std::string own_dir =
        (fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "lib").string();
    EXPECT_EQ(report.diagnostics[0].to_string(),
              path +
                  ":2:11: field 'plugins[0]': plugin 'nothere.so' is neither beside the config (" +
                  (dir.path() / "nothere.so").string() +
                  ") nor in this omnirt's plugin directory (" + own_dir + "/nothere.so)");
    // A path with a directory is only looked for where it says.
    auto nested = PipelineText::linear().top("plugins", "[lib/nothere.so]");
    auto nested_report =
        load_pipeline_report(dir.write("n.yaml", nested.text()), {.registry = &registry});
    ASSERT_EQ(nested_report.diagnostics.size(), 1u) << testing::dump(nested_report);
    EXPECT_NE(nested_report.diagnostics[0].message.find(
                  "plugin '" + (dir.path() / "lib/nothere.so").string() + "' does not exist"),
              std::string::npos)
        << nested_report.diagnostics[0].message;
    // Without loading, the path is only resolved.
    auto config = load_pipeline_file(path, {.load_plugins = false, .check_registry = false});
    ASSERT_TRUE(config.has_value());
    EXPECT_EQ(config->plugins[0], (dir.path() / "nothere.so").string());
}

// A bare file name that is not beside the config comes from the running omnirt's plugin
// directory (<directory of the executable>/../lib: this build's lib/ for a test binary in tests/),
// so the shipped configs work from any build directory; one beside the config still wins.
TEST(LoadFile, ABareNameNotBesideTheConfigIsTakenFromTheOwnPluginDirectory) {
    const fs::path own_dir = fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "lib";
    const bool made = fs::create_directories(own_dir);  // none beside a test binary's directory
    const std::string name = "omnirt-load-test-" + std::to_string(::getpid()) + ".so";
    std::ofstream(own_dir / name) << "not loaded";
    TempDir dir;
    auto p = PipelineText::linear().top("plugins", "[" + name + "]");
    std::string path = dir.write("p.yaml", p.text());
    auto config = load_pipeline_file(path, {.load_plugins = false, .check_registry = false});
    ASSERT_TRUE(config.has_value()) << config.error().message;
    EXPECT_EQ(config->plugins[0], (own_dir / name).lexically_normal().string());
    // Beside the config: that one.
    dir.write(name, "not loaded either");
    config = load_pipeline_file(path, {.load_plugins = false, .check_registry = false});
    ASSERT_TRUE(config.has_value()) << config.error().message;
    EXPECT_EQ(config->plugins[0], (dir.path() / name).string());
    fs::remove(own_dir / name);
    if (made) fs::remove(own_dir);
}

}  // namespace
}  // namespace omnirt::config
