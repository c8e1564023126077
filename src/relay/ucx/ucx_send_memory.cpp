#include "relay/ucx/ucx_send_memory.h"

#include <algorithm>
#include <optional>
#include <span>

namespace omnirt::relay::ucx {

struct SendMemory::Pool : std::enable_shared_from_this<Pool> {
    std::shared_ptr<MemoryRegion> region;
    std::size_t slot_bytes = 0;

    std::mutex mutex;
    std::condition_variable freed;
    std::vector<std::size_t> free_slots;
    bool closed = false;

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
};

SendMemory::SendMemory(std::shared_ptr<Context> context, std::shared_ptr<Pool> pool)
    : context_(std::move(context)), pool_(std::move(pool)), slot_bytes_(pool_->slot_bytes) {}

SendMemory::~SendMemory() { close(); }

Result<std::unique_ptr<SendMemory>> SendMemory::create(std::shared_ptr<Context> context,
                                                       std::size_t slot_bytes,
                                                       std::size_t credits) {
    if (slot_bytes == 0 || credits == 0) {
        return fail(ErrorCode::invalid_argument,
                    "ucx relay needs slot_bytes > 0 and credits > 0, got slot_bytes " +
                        std::to_string(slot_bytes) + " and credits " + std::to_string(credits));
    }
    if (slot_bytes > SIZE_MAX / credits) {
        return fail(ErrorCode::out_of_range, "ucx relay: slot_bytes x credits overflows");
    }
    auto pool = std::make_shared<Pool>();
    OMNI_TRY(pool->region, MemoryRegion::allocate(context, slot_bytes * credits));
    pool->slot_bytes = slot_bytes;
    // Hand out low slots first so a lightly used pool touches little memory.
    for (std::size_t i = credits; i-- > 0;) pool->free_slots.push_back(i);
    return std::unique_ptr<SendMemory>(new SendMemory(std::move(context), std::move(pool)));
}

std::size_t SendMemory::free_credits() const {
    std::lock_guard lock(pool_->mutex);
    return pool_->free_slots.size();
}

void SendMemory::close() {
    {
        std::lock_guard lock(pool_->mutex);
        pool_->closed = true;
    }
    pool_->freed.notify_all();
}

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
    OMNI_TRY(auto region, MemoryRegion::allocate(context_, nbytes));
    auto storage = Storage::wrap(
        region->data(), nbytes, Device::cpu(), [region](std::byte*) {}, /*read_only=*/false);
    {
        std::lock_guard lock(dedicated_mutex_);
        std::erase_if(dedicated_, [](const auto& weak) { return weak.expired(); });
        dedicated_.push_back(region);
    }
    return Tensor::from_storage(std::move(storage), DType::u8, shape);
}

Result<StagedSource> SendMemory::stage(const Tensor& tensor) {
    const std::size_t nbytes = tensor.nbytes();
    OMNI_CHECK(nbytes > 0, "SendMemory::stage: empty tensor");
    if (tensor.is_contiguous()) {
        // A slot leased by allocate(): the tensor's storage is the lease and its credit.
        if (pool_->region->contains(tensor.data(), nbytes)) {
            return StagedSource{tensor, nullptr, pool_->region->packed_rkey(), true};
        }
        if (auto region = find_dedicated(tensor.data(), nbytes)) {
            OMNI_TRY(auto credit, acquire_credit());
            return StagedSource{tensor, std::move(credit), region->packed_rkey()};
        }
    }
    auto shape = Shape{static_cast<std::int64_t>(nbytes)};
    OMNI_TRY(auto credit, acquire_credit());
    if (nbytes <= slot_bytes_) {
        tensor.copy_to(std::span(credit->data(), nbytes));
        OMNI_TRY(Tensor staged, Tensor::from_storage(credit, DType::u8, shape));
        return StagedSource{std::move(staged), std::move(credit), pool_->region->packed_rkey(),
                            true};
    }
    OMNI_TRY(auto region, MemoryRegion::allocate(context_, nbytes));
    tensor.copy_to(std::span(region->data(), nbytes));
    auto storage = Storage::wrap(
        region->data(), nbytes, Device::cpu(), [region](std::byte*) {}, /*read_only=*/false);
    OMNI_TRY(Tensor staged, Tensor::from_storage(std::move(storage), DType::u8, shape));
    return StagedSource{std::move(staged), std::move(credit), region->packed_rkey()};
}

}  // namespace omnirt::relay::ucx
