#pragma once
// Progress of a long checkpoint operation (loading, writing), reported in bytes and tensors.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace omnirt::checkpoint {

struct Progress {
    std::uint64_t bytes_done = 0;
    std::uint64_t bytes_total = 0;
    std::size_t tensors_done = 0;
    std::size_t tensors_total = 0;
};

// Called on the thread doing the work: once before the first tensor (zero done) and after each
// tensor; the last call has tensors_done == tensors_total. Must not throw.
using ProgressCallback = std::function<void(const Progress&)>;

// A callback that shows progress on `stream`: on a terminal one line rewritten in place (at most
// ten times a second), otherwise a line per 10 %; a final line when done. `label` starts each line
// ("loading /models/my-model").
[[nodiscard]] ProgressCallback terminal_progress(std::string label, std::FILE* stream = stderr);

// "1.2 GiB", "512.0 MiB", "17 B".
[[nodiscard]] std::string format_bytes(std::uint64_t bytes);

}  // namespace omnirt::checkpoint
