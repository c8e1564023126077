// The Relay face of a C10dCore (c10d_core.cpp holds the transport logic) and registration.
#include "relay/gloo/c10d_relay.h"

#include "relay/gloo/c10d_core.h"
#include "relay/registry.h"

#ifdef USE_C10D_NCCL
#include <torch/cuda.h>
#endif

namespace omnirt::relay {
namespace {

// Operations hold the core, so they stay usable (failing with aborted) after the relay is gone.
class C10dPut final : public PutOperation {
  public:
    C10dPut(std::shared_ptr<C10dCore> core, C10dCore::Sending sending)
        : core_(std::move(core)), sending_(std::move(sending)) {}
    const Value& metadata() const override { return sending_.metadata; }
    Status wait_for_completion(Duration timeout) override {
        return core_->wait(sending_.transfer, timeout);
    }

  private:
    std::shared_ptr<C10dCore> core_;
    C10dCore::Sending sending_;
};

class C10dGet final : public GetOperation {
  public:
    C10dGet(std::shared_ptr<C10dCore> core, C10dCore::Receiving receiving)
        : core_(std::move(core)), receiving_(std::move(receiving)) {}
    Status wait_for_completion(Duration timeout) override {
        return core_->wait(receiving_.transfer, timeout);
    }
    // The destination; its contents are defined only after a successful wait.
    Tensor tensor() const override { return receiving_.dest; }

  private:
    std::shared_ptr<C10dCore> core_;
    C10dCore::Receiving receiving_;
};

class C10dRelay final : public Relay {
  public:
    explicit C10dRelay(std::shared_ptr<C10dCore> core) : core_(std::move(core)) {}
    ~C10dRelay() override { core_->close(); }

    std::string_view backend() const override { return core_->options().backend; }
    Capabilities capabilities() const override { return core_->capabilities(); }

    Result<std::unique_ptr<PutOperation>> put_async(const Tensor& tensor,
                                                    const std::string& request_id,
                                                    std::optional<std::int64_t> dst_rank) override {
        OMNI_TRY(C10dCore::Sending sending, core_->start_send(tensor, request_id, dst_rank));
        return std::make_unique<C10dPut>(core_, std::move(sending));
    }

    Result<std::unique_ptr<GetOperation>> get_async(const Value& metadata, Tensor dest,
                                                    const std::string& request_id) override {
        OMNI_TRY(C10dCore::Receiving receiving,
                 core_->start_recv(metadata, std::move(dest), request_id));
        return std::make_unique<C10dGet>(core_, std::move(receiving));
    }

    void cleanup(const std::string& request_id) override { core_->cleanup(request_id); }
    void close() override { core_->close(); }

  private:
    std::shared_ptr<C10dCore> core_;
};

}  // namespace

Result<std::unique_ptr<Relay>> create_c10d_relay(const RelayOptions& options,
                                                 const C10dOptions& c10d) {
    OMNI_TRY(std::shared_ptr<C10dCore> core, C10dCore::join(options, c10d));
    return std::unique_ptr<Relay>(std::make_unique<C10dRelay>(std::move(core)));
}

Status register_c10d_backends() {
    static const Status status = []() -> Status {
        auto factory = [](const RelayOptions& options) { return create_c10d_relay(options); };
        OMNI_RETURN_IF_ERROR(register_backend("gloo", factory));
#ifdef USE_C10D_NCCL
        // A CUDA libtorch on a machine without a GPU: leave nccl unregistered, so that
        // create_relay explains what is missing.
        if (torch::cuda::is_available()) OMNI_RETURN_IF_ERROR(register_backend("nccl", factory));
#endif
        return {};
    }();
    return status;
}

}  // namespace omnirt::relay
