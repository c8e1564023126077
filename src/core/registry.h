#pragma once
// The named registry that replaces the spec's "dotted import paths": pipeline configs name
// stage factories and request-aware functions (`<family>.thinker`, `test.identity`), and the
// registry resolves them. Built-in code registers at start-up; shared-library plugins listed
// under `plugins:` register when loaded (config/plugins.h).
//
// Thread safety: all methods may be called from any thread.
#include <any>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/request.h"

namespace omnirt {

enum class FunctionKind : std::uint8_t {
    factory,          // builds a stage's scheduler (signature in pipeline/)
    merge,            // fan-in: merges the payloads of wait_for sources
    route,            // request-aware next-stage selection
    projection,       // per-target payload projection
    wait_for,         // request-aware fan-in source selection
    stream_done,      // request-aware stream-completion targets
    terminal_stages,  // request-aware terminal stages
};
[[nodiscard]] std::string_view to_string(FunctionKind kind);

// Signatures of the request-aware functions (config.md).
using MergeFn = std::function<Result<StagePayload>(
    const std::string& request_id,
    const std::map<std::string, std::shared_ptr<const StagePayload>>& inputs)>;
using RouteFn = std::function<Result<std::vector<std::string>>(const std::string& request_id,
                                                               const StagePayload& output)>;
using ProjectionFn =
    std::function<Result<StagePayload>(const std::string& target, const StagePayload& output)>;
// nullopt: the payload does not determine the active sources yet; keep the request pending.
using WaitForFn = std::function<Result<std::optional<std::vector<std::string>>>(
    const std::string& request_id, const std::string& from_stage, const StagePayload& payload)>;
using StreamDoneFn = std::function<Result<std::vector<std::string>>(const std::string& request_id,
                                                                    const StagePayload& output)>;
// nullopt: use the pipeline's static terminal stages.
using TerminalStagesFn =
    std::function<Result<std::optional<std::vector<std::string>>>(const OmniRequest& request)>;

struct RegistryEntry {
    std::any callable;  // one of the Fn types above, or the pipeline layer's factory type
    // Factory arguments runtime prep may inject ("model_path", "gpu_id") when the config does
    // not set them (config.md, factory_args).
    std::vector<std::string> injectable_args;
    std::string description;
};

class Registry {
  public:
    // The process-wide registry.
    static Registry& global();

    // Fails with already_exists when the name is taken for this kind.
    [[nodiscard]] Status add(FunctionKind kind, std::string name, RegistryEntry entry);
    // Like add(), but a name already taken for this kind keeps its entry and is not an error:
    // for registration functions that may run more than once. invalid_argument for an empty name.
    [[nodiscard]] Status add_if_absent(FunctionKind kind, std::string name, RegistryEntry entry);
    // A copy of the entry, or nullopt.
    [[nodiscard]] std::optional<RegistryEntry> find(FunctionKind kind, std::string_view name) const;
    [[nodiscard]] bool contains(FunctionKind kind, std::string_view name) const;
    [[nodiscard]] std::vector<std::string> names(FunctionKind kind) const;

    // Typed lookup for the core function kinds; not_found / invalid_argument with a clear message.
    template <class Fn>
    [[nodiscard]] Result<Fn> get(FunctionKind kind, std::string_view name) const {
        auto entry = find(kind, name);
        if (!entry) return fail(unknown_name_error(kind, name));
        const Fn* fn = std::any_cast<Fn>(&entry->callable);
        if (fn == nullptr) {
            return fail(ErrorCode::invalid_argument, "registered " + std::string(to_string(kind)) +
                                                         " '" + std::string(name) +
                                                         "' has a different signature");
        }
        return *fn;
    }

    // "unknown factory 'x' (registered: a, b)"; for a name under "test." it adds that the test
    // stages need the OMNIRT_TEST_STAGES=1 opt-in.
    [[nodiscard]] Error unknown_name_error(FunctionKind kind, std::string_view name) const;

  private:
    mutable std::mutex mutex_;
    std::map<std::pair<FunctionKind, std::string>, RegistryEntry, std::less<>> entries_;
};

}  // namespace omnirt
