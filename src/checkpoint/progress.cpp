#include "checkpoint/progress.h"

#include <unistd.h>

#include <chrono>
#include <memory>

namespace omnirt::checkpoint {

std::string format_bytes(std::uint64_t bytes) {
    static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) return std::to_string(bytes) + " B";
    double value = static_cast<double>(bytes);
    int unit = -1;
    while (value >= 1024 && unit < 3) {
        value /= 1024;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
    return text;
}

ProgressCallback terminal_progress(std::string label, std::FILE* stream) {
    struct State {
        std::string label;
        std::FILE* stream;
        bool terminal;
        std::chrono::steady_clock::time_point last_print;
        int last_decile = -1;
        bool finished = false;
    };
    auto state = std::make_shared<State>(State{.label = std::move(label),
                                               .stream = stream,
                                               .terminal = ::isatty(::fileno(stream)) == 1,
                                               .last_print = {}});
    return [state](const Progress& progress) {
        if (state->finished) return;
        const bool done = progress.tensors_done == progress.tensors_total;
        state->finished = done;
        const double fraction = progress.bytes_total > 0
                                    ? static_cast<double>(progress.bytes_done) /
                                          static_cast<double>(progress.bytes_total)
                                    : (done ? 1.0 : 0.0);
        const auto now = std::chrono::steady_clock::now();
        if (state->terminal) {
            if (!done && now - state->last_print < std::chrono::milliseconds(100)) return;
        } else {
            const int decile = static_cast<int>(fraction * 10);
            if (!done && decile == state->last_decile) return;
            state->last_decile = decile;
        }
        state->last_print = now;
        std::fprintf(state->stream, "%s%s: %s / %s, %zu / %zu tensors (%3.0f%%)%s",
                     state->terminal ? "\r\033[K" : "", state->label.c_str(),
                     format_bytes(progress.bytes_done).c_str(),
                     format_bytes(progress.bytes_total).c_str(), progress.tensors_done,
                     progress.tensors_total, fraction * 100, state->terminal && !done ? "" : "\n");
        std::fflush(state->stream);
    };
}

}  // namespace omnirt::checkpoint
