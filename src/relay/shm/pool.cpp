#include "relay/shm/pool.h"

#include <unistd.h>

#include <new>

#include "relay/shm/futex.h"

namespace omnirt::relay::shm {

namespace {
constexpr std::uint64_t kPoolMagic = 0x4c4f4f504d48534fULL;  // "OSHMPOOL"
constexpr std::uint32_t kPoolVersion = 1;
constexpr std::int64_t kMaxCredits = 65536;
constexpr std::uint64_t kMaxPoolBytes = std::uint64_t{1} << 46;

std::uint64_t round_up(std::uint64_t value, std::uint64_t unit) {
    return (value + unit - 1) / unit * unit;
}
}  // namespace

struct Pool::Header {
    std::uint64_t magic;
    std::uint32_t version;
    std::int32_t owner_pid;
    std::uint64_t pool_id;
    std::uint32_t slot_count;
    std::uint32_t reserved;
    std::uint64_t slot_bytes;
    std::uint64_t slot_stride;
    std::uint64_t data_offset;
    std::uint64_t segment_bytes;
    alignas(64) std::atomic<std::uint32_t> closed;
    std::atomic<std::uint32_t> credit_signal;
    std::atomic<std::uint32_t> credit_waiters;
    std::atomic<std::uint32_t> completion_waiters;
};

struct alignas(64) Pool::SlotControl {
    std::atomic<std::uint32_t> word;
    std::atomic<std::int32_t> reader_pid;
    std::atomic<std::uint64_t> offset;  // of the posted transfer, from the segment start
    std::atomic<std::uint64_t> nbytes;
};

namespace {
constexpr std::uint64_t kHeaderBytes = 128;
constexpr std::uint64_t kControlBytes = 64;
}  // namespace

Result<PoolGeometry> PoolGeometry::compute(std::uint64_t slot_bytes, std::int64_t credits) {
    if (credits < 1 || credits > kMaxCredits) {
        return fail(ErrorCode::invalid_argument, "shm relay credits must be in [1, " +
                                                     std::to_string(kMaxCredits) + "], got " +
                                                     std::to_string(credits));
    }
    if (slot_bytes < 1 || slot_bytes > kMaxPoolBytes) {
        return fail(
            ErrorCode::invalid_argument,
            "shm relay slot size must be in [1 byte, 64 TiB], got " + std::to_string(slot_bytes));
    }
    PoolGeometry geometry;
    geometry.slot_count = static_cast<std::uint32_t>(credits);
    geometry.slot_bytes = slot_bytes;
    geometry.slot_stride = round_up(slot_bytes, kPageBytes);
    geometry.data_offset = round_up(kHeaderBytes + kControlBytes * geometry.slot_count, kPageBytes);
    if (geometry.slot_stride > (kMaxPoolBytes - geometry.data_offset) / geometry.slot_count) {
        return fail(ErrorCode::invalid_argument, "shm relay pool of " + std::to_string(credits) +
                                                     " slots of " + std::to_string(slot_bytes) +
                                                     " bytes is too large");
    }
    geometry.segment_bytes = geometry.data_offset + geometry.slot_stride * geometry.slot_count;
    return geometry;
}

Pool::Pool(std::shared_ptr<Segment> segment, PoolGeometry geometry, std::uint64_t pool_id,
           pid_t owner_pid)
    : segment_(std::move(segment)), geometry_(geometry), pool_id_(pool_id), owner_pid_(owner_pid) {
    static_assert(sizeof(Header) == kHeaderBytes);
    static_assert(sizeof(SlotControl) == kControlBytes);
    static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
}

Pool::Header& Pool::header() const {
    return *std::launder(reinterpret_cast<Header*>(segment_->data()));
}

Pool::SlotControl& Pool::control(std::uint32_t slot) const {
    auto* table = segment_->data() + kHeaderBytes;
    return *std::launder(reinterpret_cast<SlotControl*>(table + kControlBytes * slot));
}

Result<std::shared_ptr<Pool>> Pool::create(const std::string& name, std::uint64_t slot_bytes,
                                           std::int64_t credits, std::uint64_t pool_id) {
    OMNI_TRY(PoolGeometry geometry, PoolGeometry::compute(slot_bytes, credits));
    OMNI_TRY(auto segment, Segment::create(name, geometry.segment_bytes, /*populate=*/true));
    std::byte* base = segment->data();
    auto* header = new (base) Header{};
    header->magic = kPoolMagic;
    header->version = kPoolVersion;
    header->owner_pid = ::getpid();
    header->pool_id = pool_id;
    header->slot_count = geometry.slot_count;
    header->slot_bytes = geometry.slot_bytes;
    header->slot_stride = geometry.slot_stride;
    header->data_offset = geometry.data_offset;
    header->segment_bytes = geometry.segment_bytes;
    for (std::uint32_t i = 0; i < geometry.slot_count; ++i) {
        auto* control = new (base + kHeaderBytes + kControlBytes * i) SlotControl{};
        control->word.store(SlotWord::make(0, SlotState::free), std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_release);
    return std::shared_ptr<Pool>(new Pool(std::move(segment), geometry, pool_id, ::getpid()));
}

Result<std::shared_ptr<Pool>> Pool::attach(const std::string& name, pid_t expected_owner,
                                           std::uint64_t expected_pool_id) {
    auto opened = Segment::open(name, /*populate=*/true);
    if (!opened && opened.error().code == ErrorCode::not_found) {
        return fail(ErrorCode::unavailable, "shm pool segment '" + name +
                                                "' does not exist: the sending relay was closed "
                                                "or its process exited");
    }
    OMNI_TRY(auto segment, std::move(opened));
    auto corrupted = [&](const std::string& why) {
        return fail(ErrorCode::data_loss, "shm pool segment '" + name + "' is corrupted: " + why);
    };
    if (segment->size() < kHeaderBytes) return corrupted("smaller than its header");
    const auto* header = std::launder(reinterpret_cast<const Header*>(segment->data()));
    if (header->magic != kPoolMagic) return corrupted("bad magic (not an omnirt shm pool)");
    if (header->version != kPoolVersion) {
        return corrupted("layout version " + std::to_string(header->version) + ", expected " +
                         std::to_string(kPoolVersion));
    }
    if (header->owner_pid != expected_owner) {
        return fail(ErrorCode::invalid_argument, "shm pool segment '" + name + "' belongs to pid " +
                                                     std::to_string(header->owner_pid) +
                                                     ", but the metadata says pid " +
                                                     std::to_string(expected_owner));
    }
    if (header->pool_id != expected_pool_id) {
        return fail(ErrorCode::not_found, "shm pool segment '" + name +
                                              "' was recreated since the metadata was written "
                                              "(pool id differs): the transfer is stale");
    }
    auto geometry = PoolGeometry::compute(header->slot_bytes, header->slot_count);
    if (!geometry) return corrupted(geometry.error().message);
    if (geometry->slot_stride != header->slot_stride ||
        geometry->data_offset != header->data_offset ||
        geometry->segment_bytes != header->segment_bytes) {
        return corrupted("inconsistent slot geometry");
    }
    if (geometry->segment_bytes > segment->size()) {
        return corrupted("header claims " + std::to_string(geometry->segment_bytes) +
                         " bytes but the segment has " + std::to_string(segment->size()));
    }
    return std::shared_ptr<Pool>(
        new Pool(std::move(segment), *geometry, expected_pool_id, expected_owner));
}

std::optional<std::uint32_t> Pool::slot_at(const std::byte* data) const {
    const std::byte* first = segment_->data() + geometry_.data_offset;
    const std::byte* end = first + geometry_.slot_stride * geometry_.slot_count;
    if (data < first || data >= end) return std::nullopt;
    auto distance = static_cast<std::uint64_t>(data - first);
    if (distance % geometry_.slot_stride != 0) return std::nullopt;
    return static_cast<std::uint32_t>(distance / geometry_.slot_stride);
}

std::optional<SlotTicket> Pool::try_acquire() {
    const std::uint32_t count = geometry_.slot_count;
    const std::uint32_t start = acquire_hint_.load(std::memory_order_relaxed) % count;
    for (std::uint32_t k = 0; k < count; ++k) {
        std::uint32_t slot = (start + k) % count;
        auto& word = control(slot).word;
        std::uint32_t current = word.load(std::memory_order_relaxed);
        if (SlotWord::state(current) != SlotState::free) continue;
        std::uint32_t generation = (SlotWord::generation(current) + 1) & SlotWord::kGenerationMask;
        if (word.compare_exchange_strong(current, SlotWord::make(generation, SlotState::writing),
                                         std::memory_order_acquire)) {
            acquire_hint_.store(slot + 1, std::memory_order_relaxed);
            return SlotTicket{slot, generation};
        }
    }
    return std::nullopt;
}

void Pool::post(SlotTicket ticket, std::uint64_t offset, std::uint64_t nbytes) {
    auto& slot = control(ticket.slot);
    slot.offset.store(offset, std::memory_order_relaxed);
    slot.nbytes.store(nbytes, std::memory_order_relaxed);
    slot.reader_pid.store(0, std::memory_order_relaxed);
    std::uint32_t expected = SlotWord::make(ticket.generation, SlotState::writing);
    bool posted = slot.word.compare_exchange_strong(
        expected, SlotWord::make(ticket.generation, SlotState::posted), std::memory_order_seq_cst);
    OMNI_CHECK(posted, "shm relay posted a slot it does not hold for writing");
}

bool Pool::cancel_write(SlotTicket ticket) {
    std::uint32_t expected = SlotWord::make(ticket.generation, SlotState::writing);
    if (!control(ticket.slot)
             .word.compare_exchange_strong(expected,
                                           SlotWord::make(ticket.generation, SlotState::free))) {
        return false;
    }
    signal_credit();
    return true;
}

void Pool::abandon(SlotTicket ticket) {
    auto& word = control(ticket.slot).word;
    std::uint32_t current = word.load();
    while (SlotWord::generation(current) == ticket.generation) {
        std::uint32_t next = 0;
        switch (SlotWord::state(current)) {
            case SlotState::free:
                return;
            case SlotState::writing:
            case SlotState::posted:
                next = SlotWord::make(ticket.generation, SlotState::free);
                break;
            case SlotState::claimed:
                if (SlotWord::abandoned(current)) return;
                next = SlotWord::make(ticket.generation, SlotState::claimed, true);
                break;
        }
        if (word.compare_exchange_weak(current, next)) {
            if (SlotWord::state(next) == SlotState::free) signal_credit();
            wake_slot(ticket.slot);
            return;
        }
    }
}

bool Pool::reclaim_from_dead_readers() {
    bool reclaimed = false;
    const pid_t self = ::getpid();
    for (std::uint32_t slot = 0; slot < geometry_.slot_count; ++slot) {
        auto& control_block = control(slot);
        std::uint32_t current = control_block.word.load();
        if (SlotWord::state(current) != SlotState::claimed) continue;
        pid_t reader = control_block.reader_pid.load();
        if (reader == 0 || reader == self || process_alive(reader)) continue;
        if (control_block.word.compare_exchange_strong(
                current, SlotWord::make(SlotWord::generation(current), SlotState::free))) {
            reclaimed = true;
            wake_slot(slot);
        }
    }
    if (reclaimed) signal_credit();
    return reclaimed;
}

bool Pool::finished(SlotTicket ticket) const {
    std::uint32_t current = word(ticket.slot);
    return SlotWord::generation(current) != ticket.generation ||
           SlotWord::state(current) == SlotState::free;
}

std::uint32_t Pool::word(std::uint32_t slot) const {
    return control(slot).word.load(std::memory_order_acquire);
}

pid_t Pool::reader_pid(std::uint32_t slot) const { return control(slot).reader_pid.load(); }

std::uint32_t Pool::credit_signal() const { return header().credit_signal.load(); }

void Pool::wait_for_credit(std::uint32_t observed_signal, std::chrono::nanoseconds timeout) {
    auto& h = header();
    h.credit_waiters.fetch_add(1);
    futex_wait(h.credit_signal, observed_signal, timeout);
    h.credit_waiters.fetch_sub(1);
}

void Pool::wait_for_word_change(std::uint32_t slot, std::uint32_t observed_word,
                                std::chrono::nanoseconds timeout) {
    auto& h = header();
    h.completion_waiters.fetch_add(1);
    futex_wait(control(slot).word, observed_word, timeout);
    h.completion_waiters.fetch_sub(1);
}

void Pool::signal_credit() {
    auto& h = header();
    h.credit_signal.fetch_add(1);
    if (h.credit_waiters.load() > 0) futex_wake_all(h.credit_signal);
}

void Pool::wake_slot(std::uint32_t slot) {
    if (header().completion_waiters.load() > 0) futex_wake_all(control(slot).word);
}

void Pool::mark_closed() {
    header().closed.store(1);
    signal_credit();
}

bool Pool::closed() const { return header().closed.load(std::memory_order_acquire) != 0; }

Status Pool::claim(SlotTicket ticket, std::uint64_t offset, std::uint64_t nbytes) {
    auto& slot = control(ticket.slot);
    auto where = [&] {
        return "slot " + std::to_string(ticket.slot) + " of '" + segment_->name() + "'";
    };
    std::uint32_t current = SlotWord::make(ticket.generation, SlotState::posted);
    if (!slot.word.compare_exchange_strong(current,
                                           SlotWord::make(ticket.generation, SlotState::claimed),
                                           std::memory_order_seq_cst)) {
        if (SlotWord::generation(current) != ticket.generation) {
            return fail(ErrorCode::not_found,
                        "stale shm metadata: " + where() + " holds generation " +
                            std::to_string(SlotWord::generation(current)) + ", not " +
                            std::to_string(ticket.generation) +
                            " (the transfer was consumed or cleaned up and the slot reused)");
        }
        switch (SlotWord::state(current)) {
            case SlotState::claimed:
                return fail(ErrorCode::failed_precondition,
                            "shm transfer in " + where() +
                                " is already being read (get_async "
                                "called twice with the same metadata?)");
            case SlotState::writing:
                return fail(ErrorCode::invalid_argument,
                            "shm transfer in " + where() + " has not been posted yet");
            default:
                return fail(ErrorCode::not_found,
                            "shm transfer in " + where() + " was already consumed or cleaned up");
        }
    }
    std::uint64_t posted_offset = slot.offset.load(std::memory_order_relaxed);
    std::uint64_t posted_nbytes = slot.nbytes.load(std::memory_order_relaxed);
    if (posted_offset != offset || posted_nbytes != nbytes) {
        // Put it back for a reader with the right metadata; if the sender abandoned it
        // meanwhile, free it instead.
        current = SlotWord::make(ticket.generation, SlotState::claimed);
        if (!slot.word.compare_exchange_strong(
                current, SlotWord::make(ticket.generation, SlotState::posted))) {
            release(ticket);
        }
        return fail(ErrorCode::invalid_argument,
                    "shm metadata does not match the transfer posted in " + where() + ": offset " +
                        std::to_string(offset) + " nbytes " + std::to_string(nbytes) +
                        " vs posted offset " + std::to_string(posted_offset) + " nbytes " +
                        std::to_string(posted_nbytes));
    }
    slot.reader_pid.store(current_pid());
    wake_slot(ticket.slot);  // a sender waiting for delivery (wait_for_delivery)
    return {};
}

void Pool::release(SlotTicket ticket) {
    auto& word = control(ticket.slot).word;
    std::uint32_t current = word.load();
    while (SlotWord::generation(current) == ticket.generation &&
           SlotWord::state(current) == SlotState::claimed) {
        if (word.compare_exchange_weak(current,
                                       SlotWord::make(ticket.generation, SlotState::free))) {
            signal_credit();
            wake_slot(ticket.slot);
            return;
        }
    }
}

}  // namespace omnirt::relay::shm
