#include "relay/shm/receiver.h"

#include <algorithm>

#include "relay/shm/copy.h"
#include "relay/shm/dedicated.h"

namespace omnirt::relay::shm {
namespace {

class ShmGetOperation final : public GetOperation {
  public:
    explicit ShmGetOperation(std::shared_ptr<Receiver::GetState> state)
        : state_(std::move(state)) {}
    // The data is in place when get_async returns; only an abort can change the outcome.
    Status wait_for_completion(Duration) override {
        std::lock_guard lock(state_->mutex);
        if (state_->aborted) {
            return fail(ErrorCode::aborted,
                        "shm get was cleaned up (cleanup(request_id) or close())");
        }
        return {};
    }
    Tensor tensor() const override {
        std::lock_guard lock(state_->mutex);
        return state_->aborted ? Tensor() : state_->tensor;
    }

  private:
    std::shared_ptr<Receiver::GetState> state_;
};

Status check_destination(const Tensor& dest, std::uint64_t nbytes) {
    if (!dest.defined()) return {};
    if (!dest.device().is_cpu()) {
        return fail(
            ErrorCode::invalid_argument,
            "shm get_async needs a host destination, got one on " + dest.device().to_string());
    }
    if (dest.read_only()) {
        return fail(ErrorCode::invalid_argument, "shm get_async destination is read-only");
    }
    if (!dest.is_contiguous()) {
        return fail(ErrorCode::invalid_argument, "shm get_async destination is not contiguous");
    }
    if (dest.nbytes() != nbytes) {
        return fail(ErrorCode::invalid_argument,
                    "shm get_async destination has " + std::to_string(dest.nbytes()) +
                        " bytes but the transfer has " + std::to_string(nbytes));
    }
    return {};
}

// A destination for a copy: `dest`, or a fresh host tensor when the caller gave none.
Result<Tensor> copy_destination(Tensor dest, std::uint64_t nbytes) {
    if (dest.defined()) return dest;
    return Tensor::empty({static_cast<std::int64_t>(nbytes)}, DType::u8);
}

Result<Tensor> read_only_view(std::byte* data, std::uint64_t nbytes, Storage::Deleter release) {
    auto storage = Storage::wrap(data, nbytes, Device::cpu(), std::move(release),
                                 /*read_only=*/true);
    return Tensor::from_storage(std::move(storage), DType::u8, {static_cast<std::int64_t>(nbytes)});
}

}  // namespace

Result<std::unique_ptr<GetOperation>> Receiver::get(const Value& metadata, Tensor dest,
                                                    const std::string& request_id) {
    {
        std::lock_guard lock(mutex_);
        if (closed_) {
            return fail(ErrorCode::failed_precondition,
                        "shm relay '" + options_.relay_name + "' is closed");
        }
    }
    OMNI_TRY(TransferMetadata parsed, TransferMetadata::parse(metadata));
    OMNI_RETURN_IF_ERROR(check_destination(dest, parsed.nbytes));
    dedicated_.drop_retired();
    // A transfer in memory this receiver has mapped before is read without asking whether its
    // sender still lives: what it posted is complete either way.
    auto read = parsed.kind == TransferKind::slot ? read_slot(parsed, std::move(dest))
                                                  : read_dedicated(parsed, std::move(dest));
    if (!read) {
        // A dead sender explains a refusal better than the refusal itself.
        OMNI_RETURN_IF_ERROR(check_sender_alive(parsed));
        return fail(read.error());
    }
    Tensor tensor = std::move(*read);

    auto state = std::make_shared<GetState>();
    state->tensor = std::move(tensor);
    std::lock_guard lock(mutex_);
    if (closed_) {
        state->aborted = true;
    } else {
        pending_[request_id].push_back(state);
        if (++tracked_gets_ > prune_threshold_) {
            tracked_gets_ = 0;
            for (auto it = pending_.begin(); it != pending_.end();) {
                std::erase_if(it->second, [](const auto& weak) { return weak.expired(); });
                tracked_gets_ += it->second.size();
                it = it->second.empty() ? pending_.erase(it) : std::next(it);
            }
            prune_threshold_ = std::max(prune_threshold_, 2 * tracked_gets_);
        }
    }
    return std::make_unique<ShmGetOperation>(std::move(state));
}

Result<std::shared_ptr<Pool>> Receiver::pool_for(const TransferMetadata& metadata) {
    {
        std::lock_guard lock(mutex_);
        // A closed sender's pool stays mapped only as long as views of it live.
        std::erase_if(pools_, [](const auto& entry) { return entry.second->closed(); });
        auto it = pools_.find(metadata.segment);
        if (it != pools_.end()) {
            const auto& pool = it->second;
            if (pool->pool_id() == metadata.pool_id && pool->owner_pid() == metadata.owner_pid) {
                return pool;
            }
            pools_.erase(it);  // a segment of the same name from another incarnation
        }
    }
    OMNI_RETURN_IF_ERROR(check_sender_alive(metadata));
    OMNI_TRY(auto pool, Pool::attach(metadata.segment, metadata.owner_pid, metadata.pool_id));
    if (pool->closed()) {
        return fail(ErrorCode::unavailable,
                    "the relay that owns shm segment '" + metadata.segment + "' was closed");
    }
    std::lock_guard lock(mutex_);
    return pools_.try_emplace(metadata.segment, std::move(pool)).first->second;
}

Result<Tensor> Receiver::read_slot(const TransferMetadata& metadata, Tensor dest) {
    OMNI_TRY(auto pool, pool_for(metadata));
    if (pool->closed()) {
        return fail(ErrorCode::unavailable,
                    "the relay that owns shm segment '" + metadata.segment + "' was closed");
    }
    const PoolGeometry& geometry = pool->geometry();
    if (metadata.slot >= geometry.slot_count) {
        return fail(ErrorCode::invalid_argument,
                    "shm metadata slot " + std::to_string(metadata.slot) +
                        " is out of range: segment '" + metadata.segment + "' has " +
                        std::to_string(geometry.slot_count) + " slots");
    }
    const std::uint64_t begin = geometry.slot_begin(metadata.slot);
    if (metadata.offset < begin || metadata.offset - begin > geometry.slot_bytes ||
        metadata.nbytes > geometry.slot_bytes - (metadata.offset - begin)) {
        return fail(ErrorCode::invalid_argument,
                    "shm metadata range (offset " + std::to_string(metadata.offset) + ", nbytes " +
                        std::to_string(metadata.nbytes) + ") lies outside slot " +
                        std::to_string(metadata.slot) + " [" + std::to_string(begin) + ", " +
                        std::to_string(begin + geometry.slot_bytes) + ") of '" + metadata.segment +
                        "'");
    }
    const SlotTicket ticket{metadata.slot, metadata.generation};
    OMNI_RETURN_IF_ERROR(pool->claim(ticket, metadata.offset, metadata.nbytes));
    std::byte* data = pool->segment()->data() + metadata.offset;
    const pid_t owner = metadata.owner_pid;
    if (zero_copy_into(dest)) {
        // The view keeps the mapping; its last reference hands the credit back.
        return read_only_view(data, metadata.nbytes,
                              [pool, ticket, receiver = weak_from_this(), owner](std::byte*) {
                                  pool->release(ticket);
                                  forget_if_dead(receiver, owner);
                              });
    }
    auto target = copy_destination(std::move(dest), metadata.nbytes);
    if (target) copy_bytes(target->mutable_data(), data, metadata.nbytes);
    pool->release(ticket);
    forget_if_dead(weak_from_this(), owner);
    return target;
}

Result<Tensor> Receiver::read_dedicated(const TransferMetadata& metadata, Tensor dest) {
    const bool zero_copy = zero_copy_into(dest);
    // A view maps lazily to keep the get cheap; a copy on one thread is faster from a
    // pre-faulted mapping, a parallel copy faults its chunks in parallel. Either way only the
    // first transfer through a segment pays: the mapping is kept for the next one.
    const bool populate = !zero_copy && !copy_runs_in_parallel(metadata.nbytes);
    auto segment = dedicated_.find(metadata);
    if (!segment) {
        OMNI_RETURN_IF_ERROR(check_sender_alive(metadata));
        OMNI_TRY(segment, dedicated_.open(metadata, populate));
    }
    const std::uint32_t generation = metadata.generation;
    OMNI_RETURN_IF_ERROR(segment->claim(generation, metadata.offset, metadata.nbytes));
    std::byte* data = segment->data_at(metadata.offset);
    if (zero_copy) {
        // The view keeps the mapping; its last reference lets the sender reuse the segment.
        return read_only_view(data, metadata.nbytes,
                              [segment, generation, receiver = weak_from_this(),
                               owner = metadata.owner_pid](std::byte*) {
                                  segment->release(generation);
                                  forget_if_dead(receiver, owner);
                              });
    }
    auto target = copy_destination(std::move(dest), metadata.nbytes);
    if (target) copy_bytes(target->mutable_data(), data, metadata.nbytes);
    segment->release(generation);
    forget_if_dead(weak_from_this(), metadata.owner_pid);
    return target;
}

void Receiver::forget_owner(pid_t owner) {
    {
        std::lock_guard lock(mutex_);
        std::erase_if(pools_,
                      [owner](const auto& entry) { return entry.second->owner_pid() == owner; });
    }
    dedicated_.forget_owner(owner);
    remove_segments_of_dead_process(owner);
}

Status Receiver::check_sender_alive(const TransferMetadata& metadata) {
    if (process_alive(metadata.owner_pid)) return {};
    forget_owner(metadata.owner_pid);
    return fail(ErrorCode::unavailable, "the sending process " +
                                            std::to_string(metadata.owner_pid) +
                                            " of shm segment '" + metadata.segment + "' is gone");
}

void Receiver::forget_if_dead(const std::weak_ptr<Receiver>& receiver, pid_t owner) {
    if (owner == current_pid() || process_alive(owner)) return;
    if (auto self = receiver.lock()) {
        self->forget_owner(owner);
    } else {
        remove_segments_of_dead_process(owner);
    }
}

void Receiver::cleanup(const std::string& request_id) {
    std::vector<std::weak_ptr<GetState>> states;
    {
        std::lock_guard lock(mutex_);
        auto it = pending_.find(request_id);
        if (it == pending_.end()) return;
        states = std::move(it->second);
        tracked_gets_ -= states.size();
        pending_.erase(it);
    }
    for (const auto& weak : states) {
        auto state = weak.lock();
        if (!state) continue;
        Tensor dropped;  // released outside the lock: dropping a view returns a credit
        std::lock_guard lock(state->mutex);
        state->aborted = true;
        dropped = std::move(state->tensor);
        state->tensor = Tensor();
    }
}

void Receiver::close() {
    std::vector<std::string> requests;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        for (const auto& [request_id, states] : pending_) requests.push_back(request_id);
    }
    for (const auto& request_id : requests) cleanup(request_id);
    dedicated_.close();
    std::lock_guard lock(mutex_);
    pools_.clear();
}

std::size_t Receiver::mapped_pools() const {
    std::lock_guard lock(mutex_);
    return pools_.size();
}

}  // namespace omnirt::relay::shm
