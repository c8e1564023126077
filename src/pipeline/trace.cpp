#include "pipeline/trace.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

namespace omnirt::pipeline {
namespace {

// Spans kept per recording; later spans are counted, not stored, so a forgotten profiler_stop
// cannot exhaust memory.
constexpr std::size_t kMaxSpans = 1'000'000;

void replace_all(std::string& text, std::string_view pattern, std::string_view replacement) {
    for (std::size_t at = text.find(pattern); at != std::string::npos;
         at = text.find(pattern, at + replacement.size())) {
        text.replace(at, pattern.size(), replacement);
    }
}

double micros_since(std::chrono::steady_clock::time_point origin,
                    std::chrono::steady_clock::time_point point) {
    return std::chrono::duration<double, std::micro>(point - origin).count();
}

}  // namespace

Tracer::Tracer(std::string stage_name) : stage_name_(std::move(stage_name)) {}

std::string Tracer::resolve_path(const std::string& path_template) const {
    std::string path = path_template;
    const bool has_stage = path.find("{stage}") != std::string::npos;
    replace_all(path, "{stage}", stage_name_);
    replace_all(path, "{pid}", std::to_string(::getpid()));
    if (!has_stage) {
        // "-<stage>" goes before the extension of the file name (not of a directory).
        const std::size_t slash = path.rfind('/');
        const std::size_t name_start = slash == std::string::npos ? 0 : slash + 1;
        const std::size_t dot = path.rfind('.');
        const bool has_extension = dot != std::string::npos && dot > name_start;
        path.insert(has_extension ? dot : path.size(), "-" + stage_name_);
    }
    return path;
}

void Tracer::start(const std::string& path_template) {
    std::lock_guard lock(mutex_);
    path_ = resolve_path(path_template);
    spans_.clear();
    origin_ = std::chrono::steady_clock::now();
    enabled_.store(true, std::memory_order_relaxed);
}

void Tracer::record(TraceSpan span) {
    if (!enabled_.load(std::memory_order_relaxed)) return;
    std::lock_guard lock(mutex_);
    // Re-checked under the lock: a span that raced with stop() belongs to no recording.
    if (!enabled_.load(std::memory_order_relaxed)) return;
    if (spans_.size() >= kMaxSpans) return;
    spans_.push_back(std::move(span));
}

Result<std::string> Tracer::stop() {
    std::vector<TraceSpan> spans;
    std::string path;
    std::chrono::steady_clock::time_point origin;
    {
        std::lock_guard lock(mutex_);
        if (!enabled_.load(std::memory_order_relaxed)) {
            return fail(ErrorCode::failed_precondition,
                        "profiler of stage '" + stage_name_ + "' is not running");
        }
        enabled_.store(false, std::memory_order_relaxed);
        spans.swap(spans_);
        path = path_;
        origin = origin_;
    }

    // One row (tid) per span kind, so a viewer draws queue waits, computes and relay transfers on
    // their own tracks.
    std::map<std::pair<std::string, std::string>, int> tracks;
    const int pid = static_cast<int>(::getpid());
    nlohmann::json events = nlohmann::json::array();
    for (const TraceSpan& span : spans) {
        // A span that began before the recording (a queue wait) is cut at the recording's start.
        const auto start = std::max(span.start, origin);
        const auto end = std::max(span.end, start);
        auto [track, inserted] =
            tracks.try_emplace({span.category, span.name}, static_cast<int>(tracks.size()) + 1);
        events.push_back({{"name", span.name},
                          {"cat", span.category},
                          {"ph", "X"},
                          {"ts", micros_since(origin, start)},
                          {"dur", micros_since(start, end)},
                          {"pid", pid},
                          {"tid", track->second},
                          {"args", {{"request_id", span.request_id}, {"stage", stage_name_}}}});
    }
    nlohmann::json document = {{"traceEvents", std::move(events)},
                               {"displayTimeUnit", "ms"},
                               {"otherData", {{"stage", stage_name_}}}};

    std::error_code ignored;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) {
        return fail(ErrorCode::unavailable,
                    "cannot write trace '" + path + "': " + std::strerror(errno));
    }
    out << document.dump() << '\n';
    out.close();
    if (!out) return fail(ErrorCode::unavailable, "cannot write trace '" + path + "'");
    return path;
}

ScopedSpan::ScopedSpan(Tracer* tracer, std::string_view name, std::string_view category,
                       std::string_view request_id)
    : tracer_(tracer),
      name_(name),
      category_(category),
      request_id_(tracer != nullptr ? std::string(request_id) : std::string()),
      start_(std::chrono::steady_clock::now()) {}

ScopedSpan::~ScopedSpan() {
    if (tracer_ == nullptr || !tracer_->enabled()) return;
    tracer_->record(TraceSpan{.name = std::string(name_),
                              .category = std::string(category_),
                              .request_id = std::move(request_id_),
                              .start = start_,
                              .end = std::chrono::steady_clock::now()});
}

}  // namespace omnirt::pipeline
