#pragma once
// GenerationCall: one generation request (chat or speech) from the pipeline accepting it to the
// client's answer, fed by the pipeline's events. The endpoints subclass it for their output
// formats; this part holds what they share: starting the request, abort on disconnect, the
// threads events run on, the SSE head, and error answers.
//
// Threads: run() on an IO thread; on_chunk and on_result on the work pool, one at a time per call
// and in the pipeline's order (every chunk before the result), so time-stretching and encoding
// never hold up the coordinator's IO thread, which serves every request's events. All of them
// under one mutex, so a subclass needs no locking of its own. Flow control of a stream (a slow
// reader pauses the request in the pipeline, a stalled one aborts it) takes no lock of the call.
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "client/output.h"
#include "core/request.h"
#include "pipeline/coordinator.h"
#include "serve/api/api_internal.h"
#include "serve/openai/protocol_error.h"

namespace omnirt::serve::api {

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
  public:
    virtual ~GenerationCall();
    GenerationCall(const GenerationCall&) = delete;
    GenerationCall& operator=(const GenerationCall&) = delete;

    // Starts `request` under request_id(); answers the client itself on every path. A streaming
    // call sends its SSE head once the pipeline accepted the request (or with the first event).
    void run(OmniRequest request);

  protected:
    GenerationCall(std::unique_ptr<Exchange> exchange, std::string request_id, bool stream);

    // One chunk of the request (work pool, in order).
    virtual void on_chunk(client::OutputDelta& delta) = 0;
    // The request completed with `result` (work pool).
    virtual void on_result(const client::FinalOutput& result) = 0;
    // Written right after the SSE head (chat: the role chunk).
    virtual void after_head() {}
    // Opens a streamed answer: SSE unless overridden (raw audio bytes).
    virtual void open_stream() { exchange_->start_sse(); }
    // Tells a streaming client about an error before the stream ends: an SSE error event unless
    // overridden (a raw byte stream can only end).
    virtual void write_stream_error(const openai::ProtocolError& error);
    // The request field a pipeline's invalid_argument error is about (its `param`), "" when
    // unknown. Stages name the OmniRequest fields they refuse (inputs.text, ...).
    [[nodiscard]] virtual std::string param_of(const Error& /*error*/) const { return ""; }

    void ensure_head();
    // The pipeline's output could not be answered: aborts the request everywhere and answers
    // 500 (an SSE error event once streaming). Later events are ignored.
    void fail(const Error& error);
    // An error answer: a response, or an SSE error event that ends the stream.
    void send_error(const openai::ProtocolError& error);

    [[nodiscard]] Exchange& exchange() const { return *exchange_; }
    [[nodiscard]] const std::string& request_id() const { return request_id_; }
    [[nodiscard]] bool streaming() const { return stream_; }

  private:
    void on_event(pipeline::RequestEvent& event);
    void on_end(const pipeline::RequestEvent& event);
    // The stream's reader fell behind, caught up, or stalled (http::HttpExchange::on_flow):
    // pauses, resumes or aborts the request. Takes no lock of the call (it runs inside write(),
    // whose caller may hold mutex_).
    void on_flow(http::StreamFlow flow);
    // Queues `task` to run on the work pool under mutex_ after every task queued before it.
    // Any thread. At most one pool task per call drains the queue.
    void post_in_order(std::function<void()> task);
    void run_in_order();

    std::unique_ptr<Exchange> exchange_;
    const std::string request_id_;
    const bool stream_;
    std::mutex mutex_;  // run()'s head vs. the first event; events vs. the pool's end
    bool head_sent_ = false;
    bool failed_ = false;
    std::atomic<bool> paused_{false};  // counted in the paused-streams gauge
    std::mutex order_mutex_;           // in_order_ and draining_ (never held while a task runs)
    std::deque<std::function<void()>> in_order_;
    bool draining_ = false;  // a pool task is draining in_order_
};

}  // namespace omnirt::serve::api
