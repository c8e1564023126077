#include "relay/shm/dedicated.h"

#include <unistd.h>

#include <new>

#include "relay/shm/futex.h"

namespace omnirt::relay::shm {
namespace {
constexpr std::uint64_t kDedicatedMagic = 0x44454453484d534fULL;  // "OSMHSDED"
constexpr std::uint32_t kDedicatedVersion = 2;
}  // namespace

struct DedicatedSegment::Header {
    std::uint64_t magic;
    std::uint32_t version;
    std::int32_t owner_pid;
    std::uint64_t segment_id;
    std::uint64_t nbytes;
    std::uint64_t data_offset;
    alignas(64) std::atomic<std::uint32_t> state;
    std::atomic<std::int32_t> reader_pid;
    std::atomic<std::uint32_t> waiters;
    std::atomic<std::uint32_t> retired;
};
static_assert(sizeof(std::atomic<std::int32_t>) == sizeof(std::int32_t));

DedicatedSegment::Header& DedicatedSegment::header() const {
    return *std::launder(reinterpret_cast<Header*>(segment_->data()));
}

Result<std::shared_ptr<DedicatedSegment>> DedicatedSegment::create(const std::string& name,
                                                                   std::uint64_t capacity,
                                                                   std::uint64_t segment_id) {
    static_assert(sizeof(Header) <= kPageBytes);
    if (capacity > (std::uint64_t{1} << 46)) {
        return fail(ErrorCode::out_of_range,
                    "shm payload of " + std::to_string(capacity) + " bytes is too large");
    }
    // The sender writes every byte right away, so pre-faulting saves a fault per page.
    OMNI_TRY(auto segment, Segment::create(name, kPageBytes + capacity, /*populate=*/true));
    auto* header = new (segment->data()) Header{};
    header->magic = kDedicatedMagic;
    header->version = kDedicatedVersion;
    header->owner_pid = ::getpid();
    header->segment_id = segment_id;
    header->state.store(DedicatedWord::make(1, DedicatedState::writing), std::memory_order_release);
    return std::shared_ptr<DedicatedSegment>(new DedicatedSegment(std::move(segment)));
}

Result<std::shared_ptr<DedicatedSegment>> DedicatedSegment::open(const std::string& name,
                                                                 pid_t expected_owner,
                                                                 std::uint64_t expected_segment_id,
                                                                 bool populate) {
    auto opened = Segment::open(name, populate);
    if (!opened && opened.error().code == ErrorCode::not_found) {
        return fail(ErrorCode::unavailable,
                    "shm dedicated segment '" + name +
                        "' does not exist: the transfer was cleaned up, or the sending relay was "
                        "closed or its process exited");
    }
    OMNI_TRY(auto segment, std::move(opened));
    auto corrupted = [&](const std::string& why) {
        return fail(ErrorCode::data_loss,
                    "shm dedicated segment '" + name + "' is corrupted: " + why);
    };
    if (segment->size() < kPageBytes) return corrupted("smaller than its header");
    const auto* header = std::launder(reinterpret_cast<const Header*>(segment->data()));
    if (header->magic != kDedicatedMagic) {
        return corrupted("bad magic (not an omnirt dedicated segment)");
    }
    if (header->version != kDedicatedVersion) return corrupted("unknown layout version");
    if (header->owner_pid != expected_owner) {
        return fail(ErrorCode::invalid_argument,
                    "shm dedicated segment '" + name + "' belongs to pid " +
                        std::to_string(header->owner_pid) + ", but the metadata says pid " +
                        std::to_string(expected_owner));
    }
    if (header->segment_id != expected_segment_id) {
        return fail(ErrorCode::not_found, "shm dedicated segment '" + name +
                                              "' was recreated since the metadata was written "
                                              "(segment id differs): the transfer is stale");
    }
    return std::shared_ptr<DedicatedSegment>(new DedicatedSegment(std::move(segment)));
}

std::uint64_t DedicatedSegment::segment_id() const { return header().segment_id; }

pid_t DedicatedSegment::owner_pid() const { return header().owner_pid; }

std::uint32_t DedicatedSegment::state_word() const {
    return header().state.load(std::memory_order_acquire);
}

pid_t DedicatedSegment::reader_pid() const { return header().reader_pid.load(); }

void DedicatedSegment::wait_for_change(std::uint32_t observed, std::chrono::nanoseconds timeout) {
    auto& h = header();
    h.waiters.fetch_add(1);
    futex_wait(h.state, observed, timeout);
    h.waiters.fetch_sub(1);
}

void DedicatedSegment::wake() {
    if (header().waiters.load() > 0) futex_wake_all(header().state);
}

std::optional<std::uint32_t> DedicatedSegment::begin_write() {
    auto& state = header().state;
    std::uint32_t current = state.load();
    while (true) {
        const DedicatedState now = DedicatedWord::state(current);
        if (now != DedicatedState::done && now != DedicatedState::aborted) return std::nullopt;
        const std::uint32_t generation =
            (DedicatedWord::generation(current) + 1) & DedicatedWord::kGenerationMask;
        if (state.compare_exchange_weak(current,
                                        DedicatedWord::make(generation, DedicatedState::writing))) {
            return generation;
        }
    }
}

void DedicatedSegment::post(std::uint32_t generation, std::uint64_t offset, std::uint64_t nbytes) {
    OMNI_CHECK(
        offset >= kPageBytes && offset <= segment_->size() && nbytes <= segment_->size() - offset,
        "shm relay posted a range outside its dedicated segment");
    header().data_offset = offset;
    header().nbytes = nbytes;
    header().reader_pid.store(0, std::memory_order_relaxed);
    std::uint32_t expected = DedicatedWord::make(generation, DedicatedState::writing);
    bool posted = header().state.compare_exchange_strong(
        expected, DedicatedWord::make(generation, DedicatedState::posted));
    OMNI_CHECK(posted, "shm relay posted a dedicated segment it does not hold for writing");
}

void DedicatedSegment::abort(std::uint32_t generation) {
    auto& state = header().state;
    std::uint32_t current = state.load();
    while (DedicatedWord::generation(current) == generation) {
        std::uint32_t next = 0;
        switch (DedicatedWord::state(current)) {
            case DedicatedState::writing:
            case DedicatedState::posted:
                next = DedicatedWord::make(generation, DedicatedState::aborted);
                break;
            case DedicatedState::claimed:
                if (DedicatedWord::abandoned(current)) return;
                next = DedicatedWord::make(generation, DedicatedState::claimed, true);
                break;
            default:
                return;
        }
        if (state.compare_exchange_weak(current, next)) {
            wake();
            return;
        }
    }
}

bool DedicatedSegment::idle() const {
    const DedicatedState state = DedicatedWord::state(state_word());
    return state == DedicatedState::done || state == DedicatedState::aborted;
}

void DedicatedSegment::retire() {
    header().retired.store(1, std::memory_order_release);
    segment_->unlink();
}

bool DedicatedSegment::retired() const {
    return header().retired.load(std::memory_order_acquire) != 0;
}

Status DedicatedSegment::claim(std::uint32_t generation, std::uint64_t offset,
                               std::uint64_t nbytes) {
    auto where = [&] { return "shm dedicated segment '" + segment_->name() + "'"; };
    auto& state = header().state;
    std::uint32_t current = DedicatedWord::make(generation, DedicatedState::posted);
    if (state.compare_exchange_strong(current,
                                      DedicatedWord::make(generation, DedicatedState::claimed))) {
        // The posted range is read only now: the claim (acquire) orders it after post().
        const std::uint64_t posted_offset = header().data_offset;
        const std::uint64_t posted_nbytes = header().nbytes;
        const std::uint64_t size = segment_->size();
        if (posted_offset != offset || posted_nbytes != nbytes || offset < kPageBytes ||
            offset > size || nbytes > size - offset) {
            current = DedicatedWord::make(generation, DedicatedState::claimed);
            if (!state.compare_exchange_strong(
                    current, DedicatedWord::make(generation, DedicatedState::posted))) {
                release(generation);
            }
            return fail(ErrorCode::invalid_argument,
                        "shm metadata (offset " + std::to_string(offset) + ", nbytes " +
                            std::to_string(nbytes) + ") does not match " + where() +
                            " (posted offset " + std::to_string(posted_offset) + ", nbytes " +
                            std::to_string(posted_nbytes) + ", " + std::to_string(size) +
                            " bytes mapped)");
        }
        header().reader_pid.store(current_pid());
        wake();  // a sender waiting for delivery (wait_for_delivery)
        return {};
    }
    if (DedicatedWord::generation(current) != generation) {
        return fail(ErrorCode::not_found,
                    "stale shm metadata: " + where() + " holds generation " +
                        std::to_string(DedicatedWord::generation(current)) + ", not " +
                        std::to_string(generation) +
                        " (the transfer was consumed or cleaned up and the segment reused)");
    }
    switch (DedicatedWord::state(current)) {
        case DedicatedState::writing:
            return fail(ErrorCode::invalid_argument, where() + " has not been posted yet");
        case DedicatedState::claimed:
            return fail(ErrorCode::failed_precondition,
                        where() + " is already being read (get_async called twice?)");
        case DedicatedState::done:
            return fail(ErrorCode::not_found, where() + " was already consumed");
        case DedicatedState::aborted:
            return fail(ErrorCode::aborted, where() + " was cleaned up by the sender");
        case DedicatedState::posted:
            break;  // only with the abandoned bit, which posted never carries
    }
    return fail(ErrorCode::data_loss, where() + " has an invalid state word");
}

void DedicatedSegment::release(std::uint32_t generation) {
    auto& state = header().state;
    std::uint32_t current = state.load();
    while (DedicatedWord::generation(current) == generation &&
           DedicatedWord::state(current) == DedicatedState::claimed) {
        if (state.compare_exchange_weak(current,
                                        DedicatedWord::make(generation, DedicatedState::done))) {
            wake();
            return;
        }
    }
}

}  // namespace omnirt::relay::shm
