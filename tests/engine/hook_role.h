#pragma once
// HookRole: an ArRole for the engine tests, made of functions (any left empty keeps TextRole's
// behaviour), so a test states only the role behaviour it exercises.
#include <functional>
#include <memory>
#include <utility>

#include "engine/ar_sequence.h"
#include "engine/text_role.h"

namespace omnirt::engine::testing {

struct HookRoleOptions {
    TextRoleOptions text;
    std::function<Result<RequestSetup>(const StagePayload&)> open;
    std::function<Status(ArSequence&, SequenceInput&)> prepare;
    std::function<bool(const ArSequence&)> ready;
    std::function<Result<at::Tensor>(ArSequence&, const TokenStep&)> feedback;
    std::function<Result<TokenFields>(ArSequence&, const TokenStep&)> on_token;
    std::function<void(Map&, const ArSequence&)> add_to_result;
    std::function<void(ArSequence&)> closed;
    std::function<void(ArSequence&)> preempted;
};

class HookRole final : public TextRole {
  public:
    explicit HookRole(HookRoleOptions options)
        : TextRole(options.text), hooks_(std::move(options)) {}

    Result<RequestSetup> open_request(const StagePayload& payload) override {
        return hooks_.open ? hooks_.open(payload) : TextRole::open_request(payload);
    }
    Status prepare_step(ArSequence& sequence, SequenceInput& input) override {
        return hooks_.prepare ? hooks_.prepare(sequence, input) : ok_status();
    }
    bool ready(const ArSequence& sequence) override {
        return hooks_.ready ? hooks_.ready(sequence) : true;
    }
    Result<at::Tensor> feedback(ArSequence& sequence, const TokenStep& step) override {
        return hooks_.feedback ? hooks_.feedback(sequence, step) : at::Tensor();
    }
    Result<TokenFields> on_token(ArSequence& sequence, const TokenStep& step) override {
        return hooks_.on_token ? hooks_.on_token(sequence, step)
                               : TextRole::on_token(sequence, step);
    }
    Result<Map> make_result(const ArSequence& sequence, const std::string& reason) override {
        OMNI_TRY(Map data, TextRole::make_result(sequence, reason));
        if (hooks_.add_to_result) hooks_.add_to_result(data, sequence);
        return data;
    }
    void close_request(ArSequence& sequence) override {
        if (hooks_.closed) hooks_.closed(sequence);
    }
    void preempted(ArSequence& sequence) override {
        if (hooks_.preempted) hooks_.preempted(sequence);
    }

  private:
    HookRoleOptions hooks_;
};

inline std::unique_ptr<ArRole> hook_role(HookRoleOptions options) {
    return std::make_unique<HookRole>(std::move(options));
}

}  // namespace omnirt::engine::testing
