#include "pipeline/input_handler.h"

#include <exception>
#include <sstream>

#include "pipeline/trace.h"

namespace omnirt::pipeline {
namespace {

std::string join(const std::set<std::string>& names) {
    std::string out;
    for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
    return out;
}

std::string seconds_text(std::chrono::milliseconds duration) {
    std::ostringstream out;
    out << std::chrono::duration<double>(duration).count();
    return out.str();
}

std::string describe_source(const std::string& from_stage) {
    return from_stage.empty() ? std::string("the coordinator") : "stage '" + from_stage + "'";
}

}  // namespace

Result<InputHandler::PayloadPtr> DirectInput::receive(const std::string&, const std::string&,
                                                      PayloadPtr payload, Clock::time_point) {
    return payload;
}

Result<std::unique_ptr<AggregatedInput>> AggregatedInput::create(AggregatedInputOptions options) {
    if (options.wait_for.empty()) {
        return fail(ErrorCode::invalid_argument, "fan-in needs at least one wait_for source");
    }
    if (!options.merge_fn) {
        return fail(ErrorCode::invalid_argument, "fan-in needs a merge_fn");
    }
    return std::unique_ptr<AggregatedInput>(new AggregatedInput(std::move(options)));
}

AggregatedInput::AggregatedInput(AggregatedInputOptions options)
    : options_(std::move(options)), wait_for_(options_.wait_for.begin(), options_.wait_for.end()) {}

Result<InputHandler::PayloadPtr> AggregatedInput::receive(const std::string& request_id,
                                                          const std::string& from_stage,
                                                          PayloadPtr payload,
                                                          Clock::time_point now) {
    if (!wait_for_.contains(from_stage)) {
        erase(request_id);
        return fail(ErrorCode::invalid_argument,
                    "fan-in got a payload from " + describe_source(from_stage) +
                        ", which is not among its wait_for sources (" + join(wait_for_) + ")");
    }
    auto [it, created] = requests_.try_emplace(request_id);
    Pending& pending = it->second;
    if (created) {
        pending.first_arrival = now;
        pending.deadline = now + options_.fan_in_timeout;
        deadlines_.emplace(pending.deadline, request_id);
    }
    if (pending.active && !pending.active->contains(from_stage)) {
        return nullptr;  // an inactive source for this request: not needed
    }
    if (!pending.inputs.emplace(from_stage, std::move(payload)).second) {
        erase(request_id);
        return fail(ErrorCode::invalid_argument,
                    "fan-in got a second payload from stage '" + from_stage + "'");
    }
    if (!pending.active) {
        if (auto status =
                resolve_active(request_id, pending, from_stage, *pending.inputs.at(from_stage));
            !status) {
            erase(request_id);
            return fail(status.error());
        }
        if (!pending.active) return nullptr;
    }
    for (const auto& source : *pending.active) {
        if (!pending.inputs.contains(source)) return nullptr;
    }
    auto merged = merge(request_id, pending);
    if (merged && options_.tracer != nullptr && options_.tracer->enabled()) {
        options_.tracer->record(TraceSpan{.name = "fan_in_wait",
                                          .category = "stage",
                                          .request_id = request_id,
                                          .start = pending.first_arrival,
                                          .end = Clock::now()});
    }
    erase(request_id);
    return merged;
}

Status AggregatedInput::resolve_active(const std::string& request_id, Pending& pending,
                                       const std::string& from_stage, const StagePayload& payload) {
    if (!options_.wait_for_fn) {
        pending.active = wait_for_;
        return ok_status();
    }
    Result<std::optional<std::vector<std::string>>> answer = std::nullopt;
    try {
        answer = options_.wait_for_fn(request_id, from_stage, payload);
    } catch (const std::exception& e) {
        return fail(ErrorCode::internal, std::string("wait_for_fn threw: ") + e.what());
    }
    if (!answer) return fail(answer.error().with_context("wait_for_fn"));
    if (!answer->has_value()) {
        if (pending.inputs.size() == wait_for_.size()) pending.active = wait_for_;
        return ok_status();
    }
    const std::vector<std::string>& subset = **answer;
    if (subset.empty()) {
        return fail(ErrorCode::invalid_argument, "wait_for_fn returned no sources");
    }
    std::set<std::string> active;
    for (const auto& source : subset) {
        if (!wait_for_.contains(source)) {
            return fail(ErrorCode::invalid_argument, "wait_for_fn returned '" + source +
                                                         "', which is not among wait_for (" +
                                                         join(wait_for_) + ")");
        }
        active.insert(source);
    }
    pending.active = std::move(active);
    return ok_status();
}

Result<InputHandler::PayloadPtr> AggregatedInput::merge(const std::string& request_id,
                                                        const Pending& pending) {
    std::map<std::string, PayloadPtr> inputs;
    for (const auto& source : *pending.active) inputs.emplace(source, pending.inputs.at(source));
    Result<StagePayload> merged = StagePayload{};
    try {
        merged = options_.merge_fn(request_id, inputs);
    } catch (const std::exception& e) {
        return fail(ErrorCode::internal, std::string("merge_fn threw: ") + e.what());
    }
    if (!merged) return fail(merged.error().with_context("merge_fn"));
    if (merged->request_id.empty()) merged->request_id = request_id;
    if (merged->request_id != request_id) {
        return fail(ErrorCode::invalid_argument,
                    "merge_fn returned a payload of request '" + merged->request_id + "'");
    }
    return std::make_shared<const StagePayload>(std::move(*merged));
}

void AggregatedInput::drop(const std::string& request_id) { erase(request_id); }

void AggregatedInput::erase(const std::string& request_id) {
    auto it = requests_.find(request_id);
    if (it == requests_.end()) return;
    deadlines_.erase({it->second.deadline, request_id});
    requests_.erase(it);
}

std::optional<InputHandler::Clock::time_point> AggregatedInput::next_deadline() const {
    if (deadlines_.empty()) return std::nullopt;
    return deadlines_.begin()->first;
}

std::vector<ExpiredInput> AggregatedInput::expire(Clock::time_point now) {
    std::vector<ExpiredInput> expired;
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
        std::string request_id = deadlines_.begin()->second;
        const Pending& pending = requests_.at(request_id);
        expired.push_back(ExpiredInput{
            .request_id = request_id,
            .error = Error{ErrorCode::deadline_exceeded,
                           "fan-in timed out after " + seconds_text(options_.fan_in_timeout) +
                               " s waiting for " + missing_sources(pending)}});
        erase(request_id);
    }
    return expired;
}

std::string AggregatedInput::missing_sources(const Pending& pending) const {
    std::set<std::string> missing;
    for (const auto& source : pending.active ? *pending.active : wait_for_) {
        if (!pending.inputs.contains(source)) missing.insert(source);
    }
    std::string text = join(missing);
    if (!pending.active && options_.wait_for_fn) text += " (wait_for_fn did not choose sources)";
    return text;
}

}  // namespace omnirt::pipeline
