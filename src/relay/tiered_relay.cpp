#include "relay/tiered_relay.h"

#include <utility>

namespace omnirt::relay {
namespace {

class TieredRelay final : public Relay {
  public:
    explicit TieredRelay(TieredRelayOptions options) : options_(std::move(options)) {}
    ~TieredRelay() override { close(); }

    [[nodiscard]] std::string_view backend() const override { return "tiered"; }

    [[nodiscard]] bool reads_backend(std::string_view name) const override {
        return name == options_.local->backend() || name == options_.remote->backend();
    }

    [[nodiscard]] Capabilities capabilities() const override {
        Capabilities local = options_.local->capabilities();
        Capabilities remote = options_.remote->capabilities();
        return Capabilities{
            .zero_copy_receive = local.zero_copy_receive && remote.zero_copy_receive,
            .cross_host = true,
            .needs_rank_topology = true,  // the tier is chosen by dst_rank
            .device_memory = local.device_memory && remote.device_memory,
            .credit_flow_control = local.credit_flow_control && remote.credit_flow_control,
        };
    }

    [[nodiscard]] Result<Tensor> allocate_send_buffer(std::size_t nbytes) override {
        switch (options_.send_buffers) {
            case TieredRelayOptions::SendBuffers::local:
                return options_.local->allocate_send_buffer(nbytes);
            case TieredRelayOptions::SendBuffers::remote:
                return options_.remote->allocate_send_buffer(nbytes);
            case TieredRelayOptions::SendBuffers::host:
                break;
        }
        return Relay::allocate_send_buffer(nbytes);
    }

    [[nodiscard]] Result<std::unique_ptr<PutOperation>> put_async(
        const Tensor& tensor, const std::string& request_id,
        std::optional<std::int64_t> dst_rank) override {
        const bool remote = dst_rank && options_.remote_ranks.contains(*dst_rank);
        return (remote ? options_.remote : options_.local)->put_async(tensor, request_id, dst_rank);
    }

    [[nodiscard]] Result<std::unique_ptr<GetOperation>> get_async(
        const Value& metadata, Tensor dest, const std::string& request_id) override {
        const Value* backend = metadata.is_map() ? metadata.find("backend") : nullptr;
        if (backend != nullptr && backend->is_string()) {
            for (Relay* relay : {options_.local.get(), options_.remote.get()}) {
                if (relay->backend() == backend->as_string()) {
                    return relay->get_async(metadata, std::move(dest), request_id);
                }
            }
        }
        return fail(ErrorCode::invalid_argument,
                    "relay metadata names no backend of this process (expected '" +
                        std::string(options_.local->backend()) + "' or '" +
                        std::string(options_.remote->backend()) + "')");
    }

    void cleanup(const std::string& request_id) override {
        options_.local->cleanup(request_id);
        options_.remote->cleanup(request_id);
    }

    void close() override {
        options_.local->close();
        options_.remote->close();
    }

  private:
    TieredRelayOptions options_;
};

}  // namespace

Result<std::unique_ptr<Relay>> create_tiered_relay(TieredRelayOptions options) {
    if (!options.local || !options.remote) {
        return fail(ErrorCode::invalid_argument, "tiered relay: needs a local and a remote relay");
    }
    if (options.local->backend() == options.remote->backend()) {
        return fail(ErrorCode::invalid_argument, "tiered relay: local and remote are both '" +
                                                     std::string(options.local->backend()) + "'");
    }
    return std::unique_ptr<Relay>(new TieredRelay(std::move(options)));
}

}  // namespace omnirt::relay
