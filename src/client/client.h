#pragma once
// Client: the request-level API front ends use (the HTTP server, `omnirt run`, embedders). It
// names requests, starts them on a coordinator, and ends them; the output protocol of output.h
// turns what comes back into text and audio.
//
// Thread safety: every method may be called from any thread. The coordinator must outlive the
// client. Callbacks follow pipeline::EventCallback's rules (no blocking, run on the coordinator's
// threads).
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/request.h"
#include "pipeline/coordinator.h"

namespace omnirt::client {

class Client {
  public:
    explicit Client(pipeline::Coordinator& coordinator);

    // A fresh id: `prefix` + 24 hex digits, unique within this process and, with high
    // probability, across processes (a random instance tag is mixed in).
    [[nodiscard]] std::string next_request_id(std::string_view prefix);

    // Starts `request` under `request_id`; `callback` receives the chunks, then one terminal
    // event. On error the callback is never called.
    [[nodiscard]] Status start(const std::string& request_id, OmniRequest request,
                               pipeline::RequestOptions options, pipeline::EventCallback callback);
    // One result (blocks; not from a callback or an IO thread).
    [[nodiscard]] Result<StagePayload> generate(const std::string& request_id, OmniRequest request,
                                                pipeline::RequestOptions options = {});
    // Ordered events pulled by the caller (blocks in next()).
    [[nodiscard]] Result<std::unique_ptr<pipeline::RequestStream>> stream(
        const std::string& request_id, OmniRequest request, pipeline::RequestOptions options = {});
    // Ends a live request everywhere; not_found when it already ended.
    [[nodiscard]] Status abort(const std::string& request_id, const std::string& reason);
    // Holds a live request in every stage (paused) or lets it go on: flow control for a reader
    // slower than the request (pipeline::Coordinator::pause). not_found when it already ended.
    [[nodiscard]] Status pause(const std::string& request_id, bool paused);

    // Profiler: every stage records spans until stop_profile, then writes a Chrome trace to
    // `trace_path_template` ({stage} and {pid} substituted; see docs/pipeline.md).
    [[nodiscard]] Status start_profile(const std::string& trace_path_template);
    [[nodiscard]] Status stop_profile();

    [[nodiscard]] pipeline::HealthReport health() const;
    [[nodiscard]] std::size_t live_requests() const;

  private:
    pipeline::Coordinator& coordinator_;
    std::uint64_t instance_tag_;
    std::atomic<std::uint64_t> counter_{0};
};

}  // namespace omnirt::client
