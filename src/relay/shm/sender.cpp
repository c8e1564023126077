#include "relay/shm/sender.h"

#include <unistd.h>

#include <algorithm>

#include "relay/shm/copy.h"
#include "relay/shm/metadata.h"

namespace omnirt::relay::shm {
namespace {

using Clock = std::chrono::steady_clock;

class ShmPutOperation final : public PutOperation {
  public:
    ShmPutOperation(std::shared_ptr<Transfer> transfer, Value metadata, Duration liveness_interval)
        : transfer_(std::move(transfer)),
          metadata_(std::move(metadata)),
          liveness_interval_(liveness_interval) {}
    const Value& metadata() const override { return metadata_; }
    Status wait_for_completion(Duration timeout) override {
        return transfer_->wait(timeout, liveness_interval_);
    }
    Status wait_for_delivery(Duration timeout) override {
        return transfer_->wait(timeout, liveness_interval_, /*until_claimed=*/true);
    }

  private:
    std::shared_ptr<Transfer> transfer_;
    Value metadata_;
    Duration liveness_interval_;
};

}  // namespace

Result<std::shared_ptr<Sender>> Sender::create(SenderOptions options) {
    SegmentName name{.instance = options.instance,
                     .pid = ::getpid(),
                     .relay = options.relay_name,
                     .serial = next_segment_serial()};
    OMNI_TRY(auto pool, Pool::create(format_segment_name(name), options.slot_bytes, options.credits,
                                     random_id()));
    return std::shared_ptr<Sender>(new Sender(std::move(options), std::move(pool)));
}

Sender::Sender(SenderOptions options, std::shared_ptr<Pool> pool)
    : options_(std::move(options)), pool_(std::move(pool)) {
    prune_threshold_ = 4 * static_cast<std::size_t>(options_.credits) + 256;
    dedicated_ = DedicatedCache::create(
        [instance = options_.instance, relay = options_.relay_name] {
            return format_segment_name({.instance = instance,
                                        .pid = ::getpid(),
                                        .relay = relay,
                                        .serial = next_segment_serial()});
        },
        options_.dedicated_cache_bytes);
}

Sender::~Sender() { close(); }

Result<DedicatedCache::Lease> Sender::acquire_dedicated(std::uint64_t nbytes) {
    release_finished_dedicated();
    return dedicated_->acquire(nbytes);
}

void Sender::release_finished_dedicated() {
    std::vector<std::shared_ptr<Transfer>> open_dedicated;
    {
        std::lock_guard lock(mutex_);
        open_dedicated.swap(open_dedicated_);
    }
    std::erase_if(open_dedicated, [](const auto& open) { return open->release_if_finished(); });
    std::lock_guard lock(mutex_);
    open_dedicated_.insert(open_dedicated_.end(), open_dedicated.begin(), open_dedicated.end());
}

Status Sender::check_open() const {
    if (closed_) {
        return fail(ErrorCode::failed_precondition,
                    "shm relay '" + options_.relay_name + "' is closed");
    }
    return {};
}

Result<SlotTicket> Sender::acquire_slot(const std::string& request_id) {
    if (auto ticket = pool_->try_acquire()) return *ticket;
    CreditWaiter waiter{.request_id = &request_id};
    std::list<CreditWaiter*>::iterator registration;
    {
        std::lock_guard lock(mutex_);
        registration = credit_waiters_.insert(credit_waiters_.end(), &waiter);
    }
    struct Unregister {
        Sender* sender;
        std::list<CreditWaiter*>::iterator registration;
        ~Unregister() {
            std::lock_guard lock(sender->mutex_);
            sender->credit_waiters_.erase(registration);
        }
    } unregister{this, registration};

    const auto deadline = deadline_after(options_.credit_wait);
    while (true) {
        {
            std::lock_guard lock(mutex_);
            if (closed_ || waiter.aborted) {
                return fail(ErrorCode::aborted,
                            std::string("shm put was aborted while waiting for a credit: ") +
                                (closed_ ? "the relay was closed" : "its request was cleaned up"));
            }
        }
        const std::uint32_t observed = pool_->credit_signal();
        if (auto ticket = pool_->try_acquire()) return *ticket;
        auto now = Clock::now();
        if (now >= deadline) {
            return fail(ErrorCode::deadline_exceeded,
                        "no shm credit came back in time: all " + std::to_string(options_.credits) +
                            " slots of relay '" + options_.relay_name +
                            "' hold transfers no receiver has released");
        }
        pool_->wait_for_credit(observed, std::min<std::chrono::nanoseconds>(
                                             deadline - now, options_.liveness_interval));
        if (pool_->credit_signal() == observed) pool_->reclaim_from_dead_readers();
    }
}

Result<Tensor> Sender::allocate_send_buffer(std::size_t nbytes) {
    {
        std::lock_guard lock(mutex_);
        OMNI_RETURN_IF_ERROR(check_open());
    }
    SendBuffer buffer;
    std::byte* data = nullptr;
    if (nbytes <= options_.slot_bytes) {
        OMNI_TRY(SlotTicket ticket, acquire_slot(std::string()));
        buffer.ticket = ticket;
        data = pool_->slot_data(ticket.slot);
    } else {
        OMNI_TRY(auto lease, acquire_dedicated(nbytes));
        buffer.dedicated = std::move(lease.segment);
        buffer.generation = lease.generation;
        data = buffer.dedicated->payload();
    }
    std::lock_guard lock(mutex_);
    if (closed_) {
        if (buffer.ticket) pool_->cancel_write(*buffer.ticket);
        return fail(ErrorCode::aborted, "shm relay '" + options_.relay_name +
                                            "' was closed while allocating a send buffer");
    }
    buffer.serial = ++next_buffer_serial_;
    auto storage = Storage::wrap(
        data, nbytes, Device::cpu(),
        // The dedicated lease stays while the tensor does, even after its transfer ended: the
        // segment is not reused while the tensor could still write into it.
        [self = shared_from_this(), serial = buffer.serial, mapping = buffer.dedicated](
            std::byte* released) { self->drop_send_buffer(released, serial); },
        /*read_only=*/false);
    buffer.storage = storage.get();
    send_buffers_[data] = std::move(buffer);
    return Tensor::from_storage(std::move(storage), DType::u8, {static_cast<std::int64_t>(nbytes)});
}

void Sender::drop_send_buffer(const std::byte* data, std::uint64_t serial) {
    SendBuffer buffer;
    {
        std::lock_guard lock(mutex_);
        auto it = send_buffers_.find(data);
        if (it == send_buffers_.end() || it->second.serial != serial) return;  // put took it
        buffer = std::move(it->second);
        send_buffers_.erase(it);
    }
    if (buffer.ticket) pool_->cancel_write(*buffer.ticket);
    if (buffer.dedicated) buffer.dedicated->abort(buffer.generation);
}

std::optional<Sender::SendBuffer> Sender::take_send_buffer(const Tensor& tensor) {
    if (!tensor.defined() || !tensor.is_contiguous()) return std::nullopt;
    const Storage* storage = tensor.storage().get();
    std::lock_guard lock(mutex_);
    auto it = send_buffers_.find(storage->data());
    if (it == send_buffers_.end() || it->second.storage != storage) return std::nullopt;
    SendBuffer buffer = std::move(it->second);
    send_buffers_.erase(it);
    return buffer;
}

Result<std::unique_ptr<PutOperation>> Sender::put(const Tensor& tensor,
                                                  const std::string& request_id) {
    {
        std::lock_guard lock(mutex_);
        OMNI_RETURN_IF_ERROR(check_open());
    }
    if (!tensor.defined()) {
        return fail(ErrorCode::invalid_argument, "shm put_async needs a defined tensor");
    }
    if (!tensor.device().is_cpu()) {
        return fail(ErrorCode::invalid_argument,
                    "shm relay moves host tensors only, got one on " + tensor.device().to_string());
    }
    const std::uint64_t nbytes = tensor.nbytes();
    TransferMetadata metadata{.segment = pool_->segment()->name(),
                              .owner_pid = current_pid(),
                              .nbytes = nbytes,
                              .pool_id = pool_->pool_id()};
    std::shared_ptr<Transfer> transfer;
    if (auto buffer = take_send_buffer(tensor)) {
        // The tensor already is shared memory: publish it in place, moving no bytes.
        if (buffer->ticket) {
            metadata.offset =
                pool_->geometry().slot_begin(buffer->ticket->slot) + tensor.storage_offset();
            pool_->post(*buffer->ticket, metadata.offset, nbytes);
            metadata.slot = buffer->ticket->slot;
            metadata.generation = buffer->ticket->generation;
            transfer = std::make_shared<Transfer>(pool_, *buffer->ticket);
        } else {
            metadata.kind = TransferKind::dedicated;
            metadata.segment = buffer->dedicated->segment().name();
            metadata.offset = DedicatedSegment::payload_offset() + tensor.storage_offset();
            metadata.generation = buffer->generation;
            metadata.segment_id = buffer->dedicated->segment_id();
            buffer->dedicated->post(buffer->generation, metadata.offset, nbytes);
            transfer = std::make_shared<Transfer>(std::move(buffer->dedicated), buffer->generation);
        }
    } else if (nbytes <= options_.slot_bytes) {
        OMNI_TRY(SlotTicket ticket, acquire_slot(request_id));
        std::byte* slot = pool_->slot_data(ticket.slot);
        if (tensor.is_contiguous()) {
            copy_bytes(slot, tensor.data(), nbytes);
        } else {
            tensor.copy_to(std::span<std::byte>(slot, nbytes));
        }
        metadata.offset = pool_->geometry().slot_begin(ticket.slot);
        metadata.slot = ticket.slot;
        metadata.generation = ticket.generation;
        pool_->post(ticket, metadata.offset, nbytes);
        transfer = std::make_shared<Transfer>(pool_, ticket);
    } else {
        OMNI_TRY(auto lease, acquire_dedicated(nbytes));
        std::byte* payload = lease.segment->payload();
        if (tensor.is_contiguous()) {
            copy_bytes(payload, tensor.data(), nbytes);
        } else {
            tensor.copy_to(std::span<std::byte>(payload, nbytes));
        }
        metadata.kind = TransferKind::dedicated;
        metadata.segment = lease.segment->segment().name();
        metadata.offset = DedicatedSegment::payload_offset();
        metadata.generation = lease.generation;
        metadata.segment_id = lease.segment->segment_id();
        lease.segment->post(lease.generation, metadata.offset, nbytes);
        transfer = std::make_shared<Transfer>(std::move(lease.segment), lease.generation);
    }
    return publish(std::move(transfer), metadata.to_value(), request_id);
}

Result<std::unique_ptr<PutOperation>> Sender::publish(std::shared_ptr<Transfer> transfer,
                                                      Value metadata,
                                                      const std::string& request_id) {
    bool closed = false;
    {
        std::lock_guard lock(mutex_);
        closed = closed_;
        if (!closed) {
            requests_[request_id].push_back(transfer);
            if (++tracked_transfers_ > prune_threshold_) prune_finished();
        }
    }
    if (closed) {
        transfer->abort();
        return fail(ErrorCode::aborted,
                    "shm relay '" + options_.relay_name + "' was closed during put_async");
    }
    // Large payloads the receivers are done with go back to the cache now, even when the
    // sender never waits for them.
    release_finished_dedicated();
    if (transfer->is_dedicated()) {
        std::lock_guard lock(mutex_);
        open_dedicated_.push_back(transfer);
    }
    return std::make_unique<ShmPutOperation>(std::move(transfer), std::move(metadata),
                                             options_.liveness_interval);
}

void Sender::prune_finished() {
    tracked_transfers_ = 0;
    for (auto it = requests_.begin(); it != requests_.end();) {
        auto& transfers = it->second;
        std::erase_if(transfers, [](const auto& transfer) { return transfer->finished(); });
        tracked_transfers_ += transfers.size();
        it = transfers.empty() ? requests_.erase(it) : std::next(it);
    }
    prune_threshold_ = std::max(prune_threshold_, 2 * tracked_transfers_);
}

void Sender::cleanup(const std::string& request_id) {
    std::vector<std::shared_ptr<Transfer>> transfers;
    bool woke_waiter = false;
    {
        std::lock_guard lock(mutex_);
        if (auto it = requests_.find(request_id); it != requests_.end()) {
            transfers = std::move(it->second);
            tracked_transfers_ -= transfers.size();
            requests_.erase(it);
        }
        for (CreditWaiter* waiter : credit_waiters_) {
            if (*waiter->request_id == request_id) woke_waiter = waiter->aborted = true;
        }
    }
    for (const auto& transfer : transfers) transfer->abort();
    if (woke_waiter) pool_->signal_credit();
}

void Sender::close() {
    std::vector<std::shared_ptr<Transfer>> transfers;
    std::vector<SendBuffer> buffers;  // leases dropped outside the lock
    std::vector<std::shared_ptr<Transfer>> open_dedicated;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        for (auto& [request_id, list] : requests_) {
            for (auto& transfer : list) transfers.push_back(std::move(transfer));
        }
        requests_.clear();
        tracked_transfers_ = 0;
        open_dedicated.swap(open_dedicated_);
        for (auto& [data, buffer] : send_buffers_) buffers.push_back(std::move(buffer));
        send_buffers_.clear();
    }
    for (const auto& transfer : transfers) transfer->abort();
    for (const auto& buffer : buffers) {
        if (buffer.dedicated) buffer.dedicated->abort(buffer.generation);
    }
    // Unlinks every dedicated segment, also those a tensor or a view still maps.
    dedicated_->close();
    pool_->mark_closed();  // wakes credit waiters, which see closed_
    pool_->segment()->unlink();
}

}  // namespace omnirt::relay::shm
