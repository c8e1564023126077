#pragma once
// Logging for the layers that include libtorch (engine, models): the process's spdlog logger
// behind plain functions, so that no translation unit includes both spdlog and libtorch. A
// CUDA libtorch 2.x ships its own, newer fmt headers, which Debian's spdlog (built against
// fmt 9) must never see. Messages are preformatted strings.
#include <string>

namespace omnirt::log {

void error(const std::string& message);
void warn(const std::string& message);
void info(const std::string& message);
void debug(const std::string& message);
// Whether debug messages are printed (to skip building expensive ones).
bool debug_enabled();

}  // namespace omnirt::log
