#include "cli/default_model.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "models/qwen3/make_checkpoint.h"

namespace omnirt::cli {
namespace {

namespace fs = std::filesystem;

// Bump when the generated checkpoint changes, so an old cached one is not reused.
constexpr const char* kTinyCheckpointName = "qwen3-tiny-v1";

std::string env(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

Result<fs::path> cache_dir() {
    if (auto dir = env("OMNIRT_CACHE_DIR"); !dir.empty()) return fs::path(dir);
    if (auto dir = env("XDG_CACHE_HOME"); !dir.empty()) return fs::path(dir) / "omnirt";
    if (auto home = env("HOME"); !home.empty()) return fs::path(home) / ".cache" / "omnirt";
    return fail(ErrorCode::not_found,
                "no cache directory for the tiny checkpoint: set OMNIRT_CACHE_DIR or HOME, or "
                "pass --model-path");
}

}  // namespace

Result<std::string> default_tiny_checkpoint() {
    OMNI_TRY(fs::path cache, cache_dir());
    const fs::path target = cache / kTinyCheckpointName;
    std::error_code ec;
    if (fs::exists(target / "config.json", ec)) return target.string();
    fs::create_directories(cache, ec);
    if (ec) {
        return fail(ErrorCode::unavailable, "cannot create " + cache.string() +
                                                " for the tiny checkpoint: " + ec.message());
    }
    const fs::path staging =
        cache / (std::string(kTinyCheckpointName) + ".tmp-" + std::to_string(::getpid()));
    fs::remove_all(staging, ec);
    auto made = models::qwen3::make_checkpoint(staging, {.preset = "tiny", .seed = 0});
    if (!made) {
        fs::remove_all(staging, ec);
        return fail(
            made.error().with_context("writing the tiny checkpoint to " + staging.string()));
    }
    fs::rename(staging, target, ec);
    if (ec) {
        // Another process put its copy in place first: use that one.
        fs::remove_all(staging, ec);
        if (!fs::exists(target / "config.json", ec)) {
            return fail(ErrorCode::unavailable,
                        "cannot move the tiny checkpoint into " + target.string());
        }
    }
    return target.string();
}

Result<std::string> qwen3_plugin_path() {
    if (auto path = env("OMNIRT_QWEN3_PLUGIN"); !path.empty()) {
        if (!fs::exists(path)) {
            return fail(ErrorCode::not_found,
                        "OMNIRT_QWEN3_PLUGIN names " + path + ", which does not exist");
        }
        return path;
    }
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    const fs::path path =
        (ec ? fs::path("bin") : self.parent_path()) / ".." / "lib" / "libomnirt_qwen3_plugin.so";
    if (!fs::exists(path, ec)) {
        return fail(ErrorCode::not_found,
                    "the default pipeline needs the Qwen3 plugin (the stage that links libtorch) "
                    "at " +
                        path.lexically_normal().string() +
                        "; build it (make build), set OMNIRT_QWEN3_PLUGIN, or run "
                        "`omnirt serve --demo` for the model-free demo pipeline");
    }
    return path.lexically_normal().string();
}

}  // namespace omnirt::cli
