#include "relay/shm/shm_relay.h"

#include <spdlog/spdlog.h>

#include "relay/registry.h"
#include "relay/shm/receiver.h"
#include "relay/shm/sender.h"

namespace omnirt::relay {

Result<std::unique_ptr<ShmRelay>> ShmRelay::create(const RelayOptions& options, ShmTuning tuning) {
    if (options.credits < 1) {
        return fail(ErrorCode::invalid_argument,
                    "shm relay needs at least one credit, got " + std::to_string(options.credits));
    }
    if (options.slot_bytes < 1) {
        return fail(ErrorCode::invalid_argument, "shm relay slot size must be positive");
    }
    // Segments of any instance whose owner died (a killed server) go first.
    if (auto removed = shm::remove_stale_segments(""); !removed) {
        spdlog::warn("shm relay: {}", removed.error().message);
    }
    std::string name = shm::sanitize_name_part(options.name, "relay");
    const std::uint64_t cache_bytes =
        tuning.dedicated_cache_bytes.value_or(shm::default_dedicated_cache_bytes());
    OMNI_TRY(auto sender, shm::Sender::create({
                              .instance = shm::instance_tag(options.runtime_dir),
                              .relay_name = name,
                              .slot_bytes = options.slot_bytes,
                              .credits = options.credits,
                              .credit_wait = tuning.credit_wait,
                              .liveness_interval = tuning.liveness_interval,
                              .dedicated_cache_bytes = cache_bytes,
                          }));
    auto receiver = std::make_shared<shm::Receiver>(
        shm::ReceiverOptions{.relay_name = name,
                             .zero_copy = options.zero_copy,
                             .dedicated_mapping_bytes = cache_bytes});
    return std::unique_ptr<ShmRelay>(
        new ShmRelay(std::move(name), std::move(sender), std::move(receiver)));
}

ShmRelay::ShmRelay(std::string name, std::shared_ptr<shm::Sender> sender,
                   std::shared_ptr<shm::Receiver> receiver)
    : name_(std::move(name)),
      pool_segment_(sender->pool_name()),
      sender_(std::move(sender)),
      receiver_(std::move(receiver)) {}

ShmRelay::~ShmRelay() { close(); }

Capabilities ShmRelay::capabilities() const {
    return Capabilities{.zero_copy_receive = true,
                        .cross_host = false,
                        .needs_rank_topology = false,
                        .device_memory = false,
                        .credit_flow_control = true};
}

Status ShmRelay::check_open() const {
    if (closed_.load()) {
        return fail(ErrorCode::failed_precondition, "shm relay '" + name_ + "' is closed");
    }
    return {};
}

Result<Tensor> ShmRelay::allocate_send_buffer(std::size_t nbytes) {
    OMNI_RETURN_IF_ERROR(check_open());
    return sender_->allocate_send_buffer(nbytes);
}

Result<std::unique_ptr<PutOperation>> ShmRelay::put_async(const Tensor& tensor,
                                                          const std::string& request_id,
                                                          std::optional<std::int64_t>) {
    OMNI_RETURN_IF_ERROR(check_open());
    return sender_->put(tensor, request_id);
}

Result<std::unique_ptr<GetOperation>> ShmRelay::get_async(const Value& metadata, Tensor dest,
                                                          const std::string& request_id) {
    OMNI_RETURN_IF_ERROR(check_open());
    return receiver_->get(metadata, std::move(dest), request_id);
}

void ShmRelay::cleanup(const std::string& request_id) {
    if (closed_.load()) return;
    sender_->cleanup(request_id);
    receiver_->cleanup(request_id);
}

void ShmRelay::close() {
    if (closed_.exchange(true)) return;
    sender_->close();
    receiver_->close();
}

std::size_t ShmRelay::mapped_peer_pools() const { return receiver_->mapped_pools(); }

std::size_t ShmRelay::blocked_senders() const { return sender_->blocked_senders(); }

ShmDedicatedStats ShmRelay::dedicated_stats() const {
    return ShmDedicatedStats{
        .sender = sender_->dedicated_stats(),
        .receiver_mappings = receiver_->dedicated_mappings().size(),
        .receiver_mappings_opened = receiver_->dedicated_mappings().opened(),
    };
}

Status register_shm_backend() {
    static const Status registered = [] {
        auto status = register_backend(
            "shm", [](const RelayOptions& options) { return create_shm_relay(options); });
        if (!status && status.error().code == ErrorCode::already_exists) return ok_status();
        return status;
    }();
    return registered;
}

Result<std::unique_ptr<Relay>> create_shm_relay(const RelayOptions& options) {
    OMNI_TRY(auto relay, ShmRelay::create(options));
    return std::unique_ptr<Relay>(std::move(relay));
}

}  // namespace omnirt::relay
