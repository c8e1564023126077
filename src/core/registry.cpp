#include "core/registry.h"

namespace omnirt {

std::string_view to_string(FunctionKind kind) {
    switch (kind) {
        case FunctionKind::factory:
            return "factory";
        case FunctionKind::merge:
            return "merge_fn";
        case FunctionKind::route:
            return "route_fn";
        case FunctionKind::projection:
            return "projection";
        case FunctionKind::wait_for:
            return "wait_for_fn";
        case FunctionKind::stream_done:
            return "stream_done_to_fn";
        case FunctionKind::terminal_stages:
            return "terminal_stages_fn";
    }
    return "function";
}

Registry& Registry::global() {
    static Registry registry;
    return registry;
}

Status Registry::add(FunctionKind kind, std::string name, RegistryEntry entry) {
    if (name.empty()) return fail(ErrorCode::invalid_argument, "registry names must not be empty");
    std::lock_guard lock(mutex_);
    auto [it, inserted] = entries_.emplace(std::make_pair(kind, name), std::move(entry));
    if (!inserted) {
        return fail(ErrorCode::already_exists,
                    std::string(to_string(kind)) + " '" + name + "' is already registered");
    }
    return {};
}

Status Registry::add_if_absent(FunctionKind kind, std::string name, RegistryEntry entry) {
    if (name.empty()) return fail(ErrorCode::invalid_argument, "registry names must not be empty");
    std::lock_guard lock(mutex_);
    entries_.try_emplace(std::make_pair(kind, std::move(name)), std::move(entry));
    return {};
}

std::optional<RegistryEntry> Registry::find(FunctionKind kind, std::string_view name) const {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(std::make_pair(kind, std::string(name)));
    if (it == entries_.end()) return std::nullopt;
    return it->second;
}

bool Registry::contains(FunctionKind kind, std::string_view name) const {
    std::lock_guard lock(mutex_);
    return entries_.contains(std::make_pair(kind, std::string(name)));
}

std::vector<std::string> Registry::names(FunctionKind kind) const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [key, entry] : entries_) {
        if (key.first == kind) out.push_back(key.second);
    }
    return out;
}

Error Registry::unknown_name_error(FunctionKind kind, std::string_view name) const {
    std::vector<std::string> known = names(kind);
    std::string message =
        "unknown " + std::string(to_string(kind)) + " '" + std::string(name) + "'";
    if (known.empty()) {
        message += " (none registered; is the plugin that provides it listed under plugins:?)";
    } else {
        message += " (registered: ";
        for (std::size_t i = 0; i < known.size(); ++i) {
            if (i) message += ", ";
            message += known[i];
        }
        message += ")";
    }
    // The test stages (src/testing) are registered only on an explicit opt-in (runner/builtins.h).
    if (name.starts_with("test.")) {
        message += "; test.* names are the test stages, registered only with OMNIRT_TEST_STAGES=1";
    }
    return Error{ErrorCode::not_found, std::move(message)};
}

}  // namespace omnirt
