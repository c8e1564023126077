#include "core/log.h"

#ifdef OMNIRT_HAVE_SPDLOG
#include <spdlog/spdlog.h>
#else
#include <cstdio>
#endif

namespace omnirt::log {

#ifdef OMNIRT_HAVE_SPDLOG
void error(const std::string& message) { spdlog::error("{}", message); }
void warn(const std::string& message) { spdlog::warn("{}", message); }
void info(const std::string& message) { spdlog::info("{}", message); }
void debug(const std::string& message) { spdlog::debug("{}", message); }
bool debug_enabled() { return spdlog::should_log(spdlog::level::debug); }
#else
void error(const std::string& message) { std::fprintf(stderr, "[error] %s\n", message.c_str()); }
void warn(const std::string& message) { std::fprintf(stderr, "[warning] %s\n", message.c_str()); }
void info(const std::string& message) { std::fprintf(stderr, "[info] %s\n", message.c_str()); }
void debug(const std::string&) {}
bool debug_enabled() { return false; }
#endif

}  // namespace omnirt::log
