#pragma once
// Turning an exception thrown by libtorch (c10, c10d, gloo) into text for our errors.
//
// Thread safety: pure functions.
#include <string>

namespace omnirt::torch_bridge {

// The first line of the exception in flight (c10 and gloo append backtraces, source locations
// and context on later lines). Call only inside a catch block.
[[nodiscard]] std::string current_exception_text();

// Whether `text` says that something timed out ("timeout" / "timed out", any case): c10d and
// gloo report their deadlines only in the message.
[[nodiscard]] bool mentions_timeout(const std::string& text);

}  // namespace omnirt::torch_bridge
