#pragma once
// Diagnostic: one problem found while loading or validating a pipeline config, with the place it
// was written. The loader collects every diagnostic of a config (not just the first) so that a
// user fixes all of them in one round; `omnirt config validate` prints them one per line.
#include <string>
#include <vector>

#include "config/schema.h"
#include "core/error.h"

namespace omnirt::config {

struct Diagnostic {
    SourceLocation location;
    std::string stage;    // stage name ("stages[2]" when it has none); empty: pipeline level
    std::string field;    // "next", "relay.credits", "fused_stages[1]"; empty: not one field
    std::string message;  // the reason, phrased so that the user can act on it

    // "<file>:<line>:<col>: stage '<stage>': field '<field>': <message>"; the stage and field
    // parts are left out when empty.
    [[nodiscard]] std::string to_string() const;
};

// Sorts into source order (line, then column; diagnostics without a line, such as those of
// `--set` overrides, keep their relative order after the located ones) and drops duplicates.
void sort_diagnostics(std::vector<Diagnostic>& diagnostics);

// Every diagnostic's to_string(), one per line, no trailing newline.
[[nodiscard]] std::string format_diagnostics(const std::vector<Diagnostic>& diagnostics);

// The Error a failed load returns: code invalid_argument, message format_diagnostics().
[[nodiscard]] Error diagnostics_error(const std::vector<Diagnostic>& diagnostics);

}  // namespace omnirt::config
