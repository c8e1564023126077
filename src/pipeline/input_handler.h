#pragma once
// Input handlers of a Stage (pipeline.md): how arriving payloads become scheduler work.
//  * DirectInput passes every payload through.
//  * AggregatedInput performs fan-in (config.md: wait_for, wait_for_fn, merge_fn,
//    fan_in_timeout_s): it keeps the payload of each source per request until every active
//    source arrived, then merges them into the one payload the scheduler gets.
//
// Thread safety: none. A Stage calls every method from its stage thread only.
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/registry.h"
#include "core/request.h"

namespace omnirt::pipeline {

class Tracer;

// A request whose fan-in gave up; its state is gone.
struct ExpiredInput {
    std::string request_id;
    Error error;  // deadline_exceeded naming the missing sources
};

class InputHandler {
  public:
    using Clock = std::chrono::steady_clock;
    using PayloadPtr = std::shared_ptr<const StagePayload>;

    virtual ~InputHandler() = default;

    // One arriving payload of `request_id` from `from_stage` ("" for the coordinator's submit).
    // Returns the payload for the scheduler once the request's inputs are complete, nullptr while
    // it waits for more, or an error that fails the request (its state is dropped then).
    [[nodiscard]] virtual Result<PayloadPtr> receive(const std::string& request_id,
                                                     const std::string& from_stage,
                                                     PayloadPtr payload, Clock::time_point now) = 0;
    // Forgets the request (abort); unknown ids are ignored.
    virtual void drop(const std::string& request_id) = 0;
    // The earliest time a pending request gives up; nullopt when none is pending.
    [[nodiscard]] virtual std::optional<Clock::time_point> next_deadline() const = 0;
    // Removes and returns the requests whose deadline is at or before `now`.
    [[nodiscard]] virtual std::vector<ExpiredInput> expire(Clock::time_point now) = 0;
    // Requests with state here.
    [[nodiscard]] virtual std::size_t pending() const = 0;
    // True when payloads are held across arrivals (the stage then copies relay data instead of
    // holding zero-copy views, which would pin the sender's credits).
    [[nodiscard]] virtual bool aggregates() const = 0;
};

class DirectInput final : public InputHandler {
  public:
    [[nodiscard]] Result<PayloadPtr> receive(const std::string& request_id,
                                             const std::string& from_stage, PayloadPtr payload,
                                             Clock::time_point now) override;
    void drop(const std::string&) override {}
    [[nodiscard]] std::optional<Clock::time_point> next_deadline() const override {
        return std::nullopt;
    }
    [[nodiscard]] std::vector<ExpiredInput> expire(Clock::time_point) override { return {}; }
    [[nodiscard]] std::size_t pending() const override { return 0; }
    [[nodiscard]] bool aggregates() const override { return false; }
};

struct AggregatedInputOptions {
    std::vector<std::string> wait_for;  // every possible source (non-empty)
    // Asked on each arrival until it returns the active subset; empty = all of wait_for.
    WaitForFn wait_for_fn;
    MergeFn merge_fn;  // required
    std::chrono::milliseconds fan_in_timeout{60000};
    // "fan_in_wait" spans (first arrival -> merge); may be null.
    Tracer* tracer = nullptr;
};

// Rules:
//  * an arrival from a stage outside wait_for, a second arrival from one source, a wait_for_fn
//    subset that is empty or not contained in wait_for, and errors (or exceptions) of the
//    functions fail the request;
//  * wait_for_fn returning nullopt keeps waiting; when every wait_for source arrived and it
//    still says nullopt, the active set is all of wait_for (nothing else can arrive);
//  * merge_fn gets exactly the active sources' payloads; a source outside the active set that
//    arrives is ignored; the merged payload carries the request's id;
//  * the deadline is fan_in_timeout after the first arrival.
class AggregatedInput final : public InputHandler {
  public:
    // invalid_argument when wait_for is empty or merge_fn is missing.
    [[nodiscard]] static Result<std::unique_ptr<AggregatedInput>> create(
        AggregatedInputOptions options);

    [[nodiscard]] Result<PayloadPtr> receive(const std::string& request_id,
                                             const std::string& from_stage, PayloadPtr payload,
                                             Clock::time_point now) override;
    void drop(const std::string& request_id) override;
    [[nodiscard]] std::optional<Clock::time_point> next_deadline() const override;
    [[nodiscard]] std::vector<ExpiredInput> expire(Clock::time_point now) override;
    [[nodiscard]] std::size_t pending() const override { return requests_.size(); }
    [[nodiscard]] bool aggregates() const override { return true; }

  private:
    struct Pending {
        std::map<std::string, PayloadPtr> inputs;
        std::optional<std::set<std::string>> active;
        Clock::time_point first_arrival;
        Clock::time_point deadline;
    };

    explicit AggregatedInput(AggregatedInputOptions options);
    [[nodiscard]] Status resolve_active(const std::string& request_id, Pending& pending,
                                        const std::string& from_stage, const StagePayload& payload);
    [[nodiscard]] Result<PayloadPtr> merge(const std::string& request_id, const Pending& pending);
    void erase(const std::string& request_id);
    [[nodiscard]] std::string missing_sources(const Pending& pending) const;

    AggregatedInputOptions options_;
    std::set<std::string> wait_for_;
    std::map<std::string, Pending> requests_;
    std::set<std::pair<Clock::time_point, std::string>> deadlines_;
};

}  // namespace omnirt::pipeline
