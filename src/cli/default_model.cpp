#include "cli/default_model.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace omnirt::cli {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

Result<fs::path> cache_dir() {
    if (auto dir = env("OMNIRT_CACHE_DIR"); !dir.empty()) return fs::path(dir);
    if (auto dir = env("XDG_CACHE_HOME"); !dir.empty()) return fs::path(dir) / "omnirt";
    if (auto home = env("HOME"); !home.empty()) return fs::path(home) / ".cache" / "omnirt";
    return fail(ErrorCode::not_found,
                "no cache directory for the default checkpoint: set OMNIRT_CACHE_DIR or HOME, or "
                "pass --model-path");
}

}  // namespace

Result<std::string> default_checkpoint(const models::ModelFamily& family) {
    const std::string& name = family.serve.default_checkpoint_name;
    if (name.empty() || !family.make_checkpoint) {
        return fail(ErrorCode::not_found, "the model family " + family.name +
                                              " has no default checkpoint: pass --model-path");
    }
    OMNI_TRY(fs::path cache, cache_dir());
    const fs::path target = cache / name;
    std::error_code ec;
    if (fs::exists(target / "config.json", ec)) return target.string();
    fs::create_directories(cache, ec);
    if (ec) {
        return fail(ErrorCode::unavailable, "cannot create " + cache.string() +
                                                " for the default checkpoint: " + ec.message());
    }
    const fs::path staging = cache / (name + ".tmp-" + std::to_string(::getpid()));
    fs::remove_all(staging, ec);
    auto made = family.make_checkpoint(
        staging, {.arch = family.name, .preset = family.serve.default_preset, .seed = 0});
    if (!made) {
        fs::remove_all(staging, ec);
        return fail(
            made.error().with_context("writing the default checkpoint to " + staging.string()));
    }
    fs::rename(staging, target, ec);
    if (ec) {
        // Another process put its copy in place first: use that one.
        fs::remove_all(staging, ec);
        if (!fs::exists(target / "config.json", ec)) {
            return fail(ErrorCode::unavailable,
                        "cannot move the default checkpoint into " + target.string());
        }
    }
    return target.string();
}

Result<std::string> family_plugin_path(const models::ModelFamily& family) {
    const models::ServeDefaults& serve = family.serve;
    if (serve.plugin_file.empty()) {
        return fail(ErrorCode::not_found,
                    "the model family " + family.name + " names no plugin for omnirt serve");
    }
    if (!serve.plugin_env.empty()) {
        if (auto path = env(serve.plugin_env.c_str()); !path.empty()) {
            if (!fs::exists(path)) {
                return fail(ErrorCode::not_found,
                            serve.plugin_env + " names " + path + ", which does not exist");
            }
            return path;
        }
    }
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    const fs::path path =
        (ec ? fs::path("bin") : self.parent_path()) / ".." / "lib" / serve.plugin_file;
    if (!fs::exists(path, ec)) {
        return fail(ErrorCode::not_found,
                    "the " + family.name +
                        " chat pipeline needs the family's plugin (the stages that link "
                        "libtorch) at " +
                        path.lexically_normal().string() + "; build it (make build)" +
                        (serve.plugin_env.empty() ? "" : ", set " + serve.plugin_env) +
                        ", or run `omnirt serve --demo` for the model-free demo pipeline");
    }
    return path.lexically_normal().string();
}

}  // namespace omnirt::cli
