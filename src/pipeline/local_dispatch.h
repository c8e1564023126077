#pragma once
// LocalDispatcher: the LOCAL_OBJECT path of communication.md. Stages of one OS process register
// here; a sender whose target is registered passes std::shared_ptr<const StagePayload> (and
// stream chunks) by reference, with no relay and no control message. The const is the read-only
// rule of the spec, enforced by the type system, so fan-out may share one payload too.
//
// Thread safety: every method may be called from any thread. Stages register before any stage
// of the process starts and unregister after all stopped.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/request.h"
#include "pipeline/scheduler.h"

namespace omnirt::pipeline {

class Stage;

class LocalDispatcher {
  public:
    void add(Stage* stage);
    void remove(const std::string& stage_name);
    [[nodiscard]] bool has(const std::string& stage_name) const;

    // False when `target` is not registered here (the caller falls back to the relay).
    bool send_payload(const std::string& target, const std::string& from_stage,
                      std::shared_ptr<const StagePayload> payload);
    bool send_stream_chunk(const std::string& target, const std::string& from_stage,
                           const std::string& request_id, std::shared_ptr<const StreamChunk> chunk);
    bool send_stream_signal(const std::string& target, const std::string& from_stage,
                            const std::string& request_id, bool done,
                            std::optional<std::string> error);

  private:
    Stage* find(const std::string& stage_name) const;
    mutable std::mutex mutex_;
    std::map<std::string, Stage*> stages_;
};

}  // namespace omnirt::pipeline
