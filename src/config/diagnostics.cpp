#include "config/diagnostics.h"

#include <algorithm>
#include <climits>
#include <set>

namespace omnirt::config {

std::string Diagnostic::to_string() const {
    std::string out = location.to_string();
    if (!out.empty()) out += ": ";
    if (!stage.empty()) out += "stage '" + stage + "': ";
    if (!field.empty()) out += "field '" + field + "': ";
    out += message;
    return out;
}

void sort_diagnostics(std::vector<Diagnostic>& diagnostics) {
    auto key = [](const Diagnostic& d) {
        int line = d.location.line > 0 ? d.location.line : INT_MAX;
        return std::pair(line, d.location.column);
    };
    std::stable_sort(diagnostics.begin(), diagnostics.end(),
                     [&](const Diagnostic& a, const Diagnostic& b) { return key(a) < key(b); });
    std::set<std::string> seen;
    std::vector<Diagnostic> unique;
    unique.reserve(diagnostics.size());
    for (auto& diagnostic : diagnostics) {
        if (seen.insert(diagnostic.to_string()).second) unique.push_back(std::move(diagnostic));
    }
    diagnostics = std::move(unique);
}

std::string format_diagnostics(const std::vector<Diagnostic>& diagnostics) {
    std::string out;
    for (const auto& diagnostic : diagnostics) {
        if (!out.empty()) out += '\n';
        out += diagnostic.to_string();
    }
    return out;
}

Error diagnostics_error(const std::vector<Diagnostic>& diagnostics) {
    return Error{ErrorCode::invalid_argument, format_diagnostics(diagnostics)};
}

}  // namespace omnirt::config
