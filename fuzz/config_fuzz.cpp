// libFuzzer target: arbitrary bytes as a pipeline config. Loading must end in a config or in
// diagnostics, never in a crash, a hang, an escaped exception or a leak, whatever the input
// (yaml-cpp errors, deep nesting, alias bombs, huge numbers, stray bytes).
//
// Input layout: bytes before the first NUL, if any, are one `--set` override; the rest is the
// config text. Plugins are not loaded and the registry is not consulted.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/load.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);
    omnirt::config::LoadOptions options{.load_plugins = false, .check_registry = false};
    std::string_view text = input;
    if (std::size_t nul = input.find('\0'); nul != std::string_view::npos) {
        options.overrides.emplace_back(input.substr(0, nul));
        text = input.substr(nul + 1);
    }
    auto report = omnirt::config::load_pipeline_text_report(text, "<fuzz>", options);
    // The report holds a config exactly when it holds no diagnostic.
    if (report.config.has_value() != report.diagnostics.empty()) __builtin_trap();
    for (const auto& diagnostic : report.diagnostics) {
        if (diagnostic.to_string().empty()) __builtin_trap();
    }
    return 0;
}
