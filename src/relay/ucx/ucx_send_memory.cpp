#include "relay/ucx/ucx_send_memory.h"

#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <span>

namespace omnirt::relay::ucx {
namespace {

struct IdleRegion {
    std::shared_ptr<MemoryRegion> region;
    bool resident = true;  // false once its pages were given back
};

}  // namespace

struct SendMemory::Pool : std::enable_shared_from_this<Pool> {
    std::shared_ptr<MemoryRegion> region;
    std::size_t slot_bytes = 0;

    std::mutex mutex;
    std::condition_variable freed;
    std::vector<std::size_t> free_slots;
    bool closed = false;

    // Dedicated mappings not in use, by size (a power of two), reused before new ones are made.
    // They stay mapped while the relay is open: a reader that comes late (after a cleanup) must
    // find mapped memory, because UCX's software get over TCP reads whatever address it is
    // sent. Beyond `idle_limit` resident bytes their pages go back to the system (punched out of
    // the memfd; such a region reads as zeros until reused).
    std::map<std::size_t, std::vector<IdleRegion>> idle;
    std::size_t idle_resident_bytes = 0;
    std::size_t idle_limit = 0;

    // A Storage over slot `index` that returns it when the last reference goes.
    std::shared_ptr<Storage> lease(std::size_t index) {
        return Storage::wrap(
            region->data() + index * slot_bytes, slot_bytes, Device::cpu(),
            [self = shared_from_this(), index](std::byte*) { self->release(index); },
            /*read_only=*/false);
    }

    void release(std::size_t index) {
        {
            std::lock_guard lock(mutex);
            free_slots.push_back(index);
        }
        freed.notify_one();
    }

    std::shared_ptr<MemoryRegion> take_idle(std::size_t size) {
        std::lock_guard lock(mutex);
        auto it = idle.find(size);
        if (it == idle.end() || it->second.empty()) return nullptr;
        IdleRegion entry = std::move(it->second.back());
        it->second.pop_back();
        if (entry.resident) idle_resident_bytes -= size;
        return std::move(entry.region);
    }

    // A Storage over `nbytes` of a dedicated mapping, which goes back to `idle` at the end.
    std::shared_ptr<Storage> wrap_dedicated(std::shared_ptr<MemoryRegion> dedicated,
                                            std::size_t nbytes) {
        std::byte* data = dedicated->data();
        return Storage::wrap(
            data, nbytes, Device::cpu(),
            [self = shared_from_this(), dedicated = std::move(dedicated)](std::byte*) mutable {
                self->keep_idle(std::move(dedicated));
            },
            /*read_only=*/false);
    }

    void keep_idle(std::shared_ptr<MemoryRegion> dedicated) {
        std::lock_guard lock(mutex);
        // After close() the worker is gone (SendMemory::close runs after the engine stopped),
        // so nobody can read it any more: unmapped when `dedicated` goes.
        if (closed) return;
        const std::size_t size = dedicated->size();
        bool resident = idle_resident_bytes + size <= idle_limit;
        if (resident) {
            idle_resident_bytes += size;
        } else {
            dedicated->shared().release_pages();
        }
        idle[size].push_back(IdleRegion{std::move(dedicated), resident});
    }
};

SendMemory::SendMemory(std::shared_ptr<Context> context, std::shared_ptr<Pool> pool)
    : context_(std::move(context)), pool_(std::move(pool)), slot_bytes_(pool_->slot_bytes) {}

SendMemory::~SendMemory() {
    wake_waiters();
    close();
}

Result<std::unique_ptr<SendMemory>> SendMemory::create(std::shared_ptr<Context> context,
                                                       std::size_t slot_bytes,
                                                       std::size_t credits) {
    if (slot_bytes == 0 || credits == 0) {
        return fail(ErrorCode::invalid_argument,
                    "ucx relay needs slot_bytes > 0 and credits > 0, got slot_bytes " +
                        std::to_string(slot_bytes) + " and credits " + std::to_string(credits));
    }
    if (slot_bytes > SIZE_MAX / 4 / credits) {
        return fail(ErrorCode::out_of_range, "ucx relay: slot_bytes x credits overflows");
    }
    auto pool = std::make_shared<Pool>();
    OMNI_TRY(pool->region, MemoryRegion::allocate(context, slot_bytes * credits));
    // Senders write every slot they use; one call beats a fault per page later.
    prefault(pool->region->data(), pool->region->size(), /*for_write=*/true);
    pool->slot_bytes = slot_bytes;
    pool->idle_limit = slot_bytes * credits;
    // Hand out low slots first so a lightly used pool touches little memory.
    for (std::size_t i = credits; i-- > 0;) pool->free_slots.push_back(i);
    return std::unique_ptr<SendMemory>(new SendMemory(std::move(context), std::move(pool)));
}

std::size_t SendMemory::free_credits() const {
    std::lock_guard lock(pool_->mutex);
    return pool_->free_slots.size();
}

void SendMemory::wake_waiters() {
    {
        std::lock_guard lock(pool_->mutex);
        pool_->closed = true;
    }
    pool_->freed.notify_all();
}

void SendMemory::close() {
    std::map<std::size_t, std::vector<IdleRegion>> idle;
    {
        std::lock_guard lock(pool_->mutex);
        pool_->closed = true;
        idle.swap(pool_->idle);
        pool_->idle_resident_bytes = 0;
    }
    pool_->freed.notify_all();
}  // `idle` unmaps here, outside the lock

Result<std::shared_ptr<Storage>> SendMemory::acquire_credit() {
    std::size_t index = 0;
    {
        std::unique_lock lock(pool_->mutex);
        pool_->freed.wait(lock, [&] { return !pool_->free_slots.empty() || pool_->closed; });
        if (pool_->closed) {
            return fail(ErrorCode::aborted, "ucx relay was closed while a put waited for a credit");
        }
        index = pool_->free_slots.back();
        pool_->free_slots.pop_back();
    }
    return pool_->lease(index);
}

std::shared_ptr<MemoryRegion> SendMemory::find_dedicated(const std::byte* data,
                                                         std::size_t nbytes) {
    std::lock_guard lock(dedicated_mutex_);
    for (const auto& weak : dedicated_) {
        auto region = weak.lock();
        if (region && region->contains(data, nbytes)) return region;
    }
    return nullptr;
}

Result<SendMemory::Dedicated> SendMemory::dedicated(std::size_t nbytes, bool track) {
    const std::size_t size = std::bit_ceil(nbytes);
    auto region = pool_->take_idle(size);
    if (!region) {
        OMNI_TRY(region, MemoryRegion::allocate(context_, size));
    }
    prefault(region->data(), nbytes, /*for_write=*/true);
    if (track) {
        std::lock_guard lock(dedicated_mutex_);
        std::erase_if(dedicated_, [](const auto& weak) { return weak.expired(); });
        dedicated_.push_back(region);
    }
    auto storage = pool_->wrap_dedicated(region, nbytes);
    return Dedicated{std::move(storage), std::move(region)};
}

Result<Tensor> SendMemory::allocate(std::size_t nbytes) {
    auto shape = Shape{static_cast<std::int64_t>(nbytes)};
    if (nbytes == 0) return Tensor::empty(shape, DType::u8);
    if (nbytes <= slot_bytes_) {
        std::optional<std::size_t> index;
        {
            std::lock_guard lock(pool_->mutex);
            if (!pool_->free_slots.empty() && !pool_->closed) {
                index = pool_->free_slots.back();
                pool_->free_slots.pop_back();
            }
        }
        if (!index) return Tensor::empty(shape, DType::u8);
        return Tensor::from_storage(pool_->lease(*index), DType::u8, shape);
    }
    OMNI_TRY(Dedicated buffer, dedicated(nbytes, /*track=*/true));
    return Tensor::from_storage(std::move(buffer.storage), DType::u8, shape);
}

Result<StagedSource> SendMemory::stage(const Tensor& tensor) {
    const std::size_t nbytes = tensor.nbytes();
    OMNI_CHECK(nbytes > 0, "SendMemory::stage: empty tensor");
    if (tensor.is_contiguous()) {
        // A slot leased by allocate(): the tensor's storage is the lease and its credit.
        if (pool_->region->contains(tensor.data(), nbytes)) {
            return StagedSource{tensor, nullptr, pool_->region};
        }
        if (auto region = find_dedicated(tensor.data(), nbytes)) {
            OMNI_TRY(auto credit, acquire_credit());
            return StagedSource{tensor, std::move(credit), std::move(region)};
        }
    }
    auto shape = Shape{static_cast<std::int64_t>(nbytes)};
    OMNI_TRY(auto credit, acquire_credit());
    if (nbytes <= slot_bytes_) {
        tensor.copy_to(std::span(credit->data(), nbytes));
        OMNI_TRY(Tensor staged, Tensor::from_storage(credit, DType::u8, shape));
        return StagedSource{std::move(staged), std::move(credit), pool_->region};
    }
    OMNI_TRY(Dedicated buffer, dedicated(nbytes, /*track=*/false));
    tensor.copy_to(std::span(buffer.storage->data(), nbytes));
    OMNI_TRY(Tensor staged, Tensor::from_storage(std::move(buffer.storage), DType::u8, shape));
    return StagedSource{std::move(staged), std::move(credit), std::move(buffer.region)};
}

}  // namespace omnirt::relay::ucx
