// The loader (config/load.h): read -> parse -> overrides -> structs -> plugins -> validate.
#include "config/load.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "config/plugins.h"
#include "config/validate.h"

namespace omnirt::config {
namespace {

namespace fs = std::filesystem;

expected<std::string, std::string> read_file(const std::string& path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) return unexpected<std::string>("it is a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in) return unexpected<std::string>(std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return unexpected<std::string>("read error");
    return text.str();
}

std::string top_level(const std::string& field) {
    return field.substr(0, field.find_first_of(".["));
}

// The plugin directory of the running omnirt: <directory of the executable>/../lib (build/lib
// beside build/bin/omnirt, in any build directory or install prefix). Empty when unknown.
fs::path own_plugin_dir() {
    std::error_code error;
    const fs::path exe = fs::read_symlink("/proc/self/exe", error);
    if (error || exe.empty()) return {};
    return exe.parent_path().parent_path() / "lib";
}

// Resolves `plugins:` against `base_dir` and, when asked, loads each one (separately, so that
// every failing plugin is reported). Returns false when a plugin failed to load.
bool resolve_and_load_plugins(PipelineConfig& config, const fs::path& base_dir,
                              const LoadOptions& options, Registry& registry,
                              std::vector<Diagnostic>& out) {
    bool loaded_all = true;
    for (std::size_t i = 0; i < config.plugins.size(); ++i) {
        std::string field = "plugins[" + std::to_string(i) + "]";
        const SourceLocation& location = config.location_of(field);
        std::string& plugin = config.plugins[i];
        if (plugin.empty()) {
            out.push_back(Diagnostic{location, "", field, "plugin path must not be empty"});
            loaded_all = false;
            continue;
        }
        fs::path path(plugin);
        if (path.is_relative()) {
            const fs::path beside = base_dir / path;
            // A bare file name not beside the config: the running omnirt's plugin directory.
            const fs::path own_dir = own_plugin_dir();
            const fs::path own = own_dir / path;
            if (path.has_parent_path() || fs::exists(beside)) {
                path = beside;
            } else if (!own_dir.empty() && fs::exists(own)) {
                path = own;
            } else if (options.load_plugins) {
                out.push_back(Diagnostic{location, "", field,
                                         "plugin '" + plugin + "' is neither beside the config (" +
                                             beside.lexically_normal().string() +
                                             ") nor in this omnirt's plugin directory (" +
                                             own.lexically_normal().string() + ")"});
                plugin = beside.lexically_normal().string();
                loaded_all = false;
                continue;
            } else {
                path = beside;  // only resolved: as written
            }
        }
        plugin = path.lexically_normal().string();
        if (!options.load_plugins) continue;
        auto loaded = load_plugins({plugin}, registry);
        if (!loaded) {
            out.push_back(Diagnostic{location, "", field, loaded.error().message});
            loaded_all = false;
        }
    }
    return loaded_all;
}

// Validation diagnostics about a field that already failed to parse repeat the parse error
// (a `next` of the wrong type then also looks missing); keep only the parse error.
void append_validation(const std::vector<Diagnostic>& parse_diagnostics,
                       std::vector<Diagnostic> found, std::vector<Diagnostic>& out) {
    std::set<std::pair<std::string, std::string>> failed_fields;
    std::set<std::string> failed_stages;
    bool terminal_failed = false;
    for (const auto& diagnostic : parse_diagnostics) {
        if (diagnostic.field.empty()) {
            if (!diagnostic.stage.empty()) failed_stages.insert(diagnostic.stage);
        } else {
            failed_fields.emplace(diagnostic.stage, top_level(diagnostic.field));
            terminal_failed |= !diagnostic.stage.empty() && diagnostic.field == "terminal";
        }
    }
    for (auto& diagnostic : found) {
        if (failed_stages.contains(diagnostic.stage)) continue;
        if (failed_fields.contains({diagnostic.stage, top_level(diagnostic.field)})) continue;
        // "no stage is terminal" follows from a `terminal:` that could not be read.
        if (terminal_failed && diagnostic.stage.empty() && diagnostic.field == "stages" &&
            diagnostic.message.starts_with("no stage is terminal")) {
            continue;
        }
        out.push_back(std::move(diagnostic));
    }
}

LoadReport load(std::string_view text, const std::string& source, const fs::path& base_dir,
                const LoadOptions& options) {
    LoadReport report;
    std::vector<Diagnostic>& out = report.diagnostics;
    try {
        auto document = parse_config_document(text, source);
        if (!document) {
            out.push_back(std::move(document).error());
            return report;
        }
        ConfigNode root = std::move(document).value();
        for (const auto& assignment : options.overrides) {
            auto applied = apply_override(root, assignment);
            if (!applied) out.push_back(std::move(applied).error());
        }
        std::vector<Diagnostic> parse_diagnostics;
        PipelineConfig config = parse_pipeline(root, parse_diagnostics);
        config.source = source;
        out.insert(out.end(), parse_diagnostics.begin(), parse_diagnostics.end());
        // A document that is not a map has nothing to validate.
        if (root.is_map()) {
            Registry& registry = options.registry ? *options.registry : Registry::global();
            bool plugins_loaded =
                resolve_and_load_plugins(config, base_dir, options, registry, out);
            // Without a plugin its names are unknown; the plugin's own error says why.
            ValidateOptions validate_options{
                .check_registry = options.check_registry && plugins_loaded, .registry = &registry};
            append_validation(parse_diagnostics, validate_pipeline(config, validate_options), out);
        }
        sort_diagnostics(out);
        if (out.empty()) report.config = std::move(config);
    } catch (const std::exception& error) {
        // Nothing below is expected to throw (yaml-cpp errors are converted in
        // parse_config_document); allocation failure and library bugs end up here.
        out.push_back(Diagnostic{SourceLocation{source, 0, 0}, "", "",
                                 std::string("cannot load the config: ") + error.what()});
        report.config.reset();
    }
    return report;
}

fs::path directory_of(const std::string& path) {
    std::error_code ec;
    fs::path absolute = fs::absolute(fs::path(path), ec);
    if (ec) return fs::path(path).parent_path();
    return absolute.parent_path();
}

fs::path working_directory() {
    std::error_code ec;
    fs::path cwd = fs::current_path(ec);
    return ec ? fs::path(".") : cwd;
}

Result<PipelineConfig> to_result(LoadReport report) {
    if (!report.ok()) return fail(diagnostics_error(report.diagnostics));
    return std::move(*report.config);
}

}  // namespace

LoadReport load_pipeline_report(const std::string& path, const LoadOptions& options) {
    auto text = read_file(path);
    if (!text) {
        LoadReport report;
        report.diagnostics.push_back(Diagnostic{SourceLocation{path, 0, 0}, "", "",
                                                "cannot read config file: " + text.error()});
        return report;
    }
    return load(*text, path, directory_of(path), options);
}

LoadReport load_pipeline_text_report(std::string_view text, const std::string& source_name,
                                     const LoadOptions& options) {
    std::error_code ec;
    bool is_file = !source_name.empty() && fs::is_regular_file(source_name, ec);
    return load(text, source_name, is_file ? directory_of(source_name) : working_directory(),
                options);
}

Result<PipelineConfig> load_pipeline_file(const std::string& path, const LoadOptions& options) {
    auto text = read_file(path);
    if (!text) {
        return fail(ErrorCode::not_found,
                    "cannot read config file '" + path + "': " + text.error());
    }
    return to_result(load(*text, path, directory_of(path), options));
}

Result<PipelineConfig> load_pipeline_text(std::string_view text, const std::string& source_name,
                                          const LoadOptions& options) {
    return to_result(load_pipeline_text_report(text, source_name, options));
}

}  // namespace omnirt::config
