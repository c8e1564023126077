#include "relay/shm/metadata.h"

#include <limits>

#include "relay/relay.h"
#include "relay/shm/dedicated.h"
#include "relay/shm/pool.h"
#include "relay/shm/segment.h"

namespace omnirt::relay::shm {
namespace {

Result<std::uint64_t> read_integer(const Value& metadata, std::string_view field,
                                   std::uint64_t max) {
    const Value* value = metadata.find(field);
    if (value == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    "shm relay metadata has no '" + std::string(field) + "' field");
    }
    const std::int64_t* number = value->if_int();
    if (number == nullptr) {
        return fail(ErrorCode::invalid_argument, "shm relay metadata field '" + std::string(field) +
                                                     "' must be an integer, got " +
                                                     std::string(to_string(value->kind())));
    }
    if (*number < 0 || static_cast<std::uint64_t>(*number) > max) {
        return fail(ErrorCode::invalid_argument, "shm relay metadata field '" + std::string(field) +
                                                     "' is " + std::to_string(*number) +
                                                     ", outside [0, " + std::to_string(max) + "]");
    }
    return static_cast<std::uint64_t>(*number);
}

Result<std::string> read_string(const Value& metadata, std::string_view field) {
    const Value* value = metadata.find(field);
    if (value == nullptr || !value->is_string()) {
        return fail(ErrorCode::invalid_argument,
                    "shm relay metadata has no '" + std::string(field) + "' string");
    }
    return value->as_string();
}

}  // namespace

Value TransferMetadata::to_value() const {
    Map map{
        {"backend", Value(kBackendName)},
        {"nbytes", Value(nbytes)},
        {"kind", Value(kind == TransferKind::slot ? "slot" : "dedicated")},
        {"segment", Value(segment)},
        {"owner_pid", Value(static_cast<std::int64_t>(owner_pid))},
        {"offset", Value(offset)},
        {"generation", Value(generation)},
    };
    if (kind == TransferKind::slot) {
        map.emplace("slot", Value(slot));
        map.emplace("pool_id", Value(pool_id));
    } else {
        map.emplace("segment_id", Value(segment_id));
    }
    return Value(std::move(map));
}

Result<TransferMetadata> TransferMetadata::parse(const Value& metadata) {
    OMNI_TRY(CommonMetadata common, read_common_metadata(metadata, kBackendName));
    constexpr auto kMaxInt = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    TransferMetadata parsed;
    parsed.nbytes = common.nbytes;
    OMNI_TRY(std::string kind, read_string(metadata, "kind"));
    if (kind == "slot") {
        parsed.kind = TransferKind::slot;
    } else if (kind == "dedicated") {
        parsed.kind = TransferKind::dedicated;
    } else {
        return fail(ErrorCode::invalid_argument,
                    "shm relay metadata 'kind' is '" + kind + "', expected 'slot' or 'dedicated'");
    }
    OMNI_TRY(parsed.segment, read_string(metadata, "segment"));
    OMNI_TRY(std::uint64_t owner, read_integer(metadata, "owner_pid", 0x7fffffff));
    if (owner == 0) {
        return fail(ErrorCode::invalid_argument, "shm relay metadata 'owner_pid' is 0");
    }
    parsed.owner_pid = static_cast<pid_t>(owner);
    auto name = parse_segment_name(parsed.segment);
    if (!parsed.segment.starts_with('/') || !name) {
        return fail(ErrorCode::invalid_argument, "shm relay metadata 'segment' is '" +
                                                     parsed.segment +
                                                     "', not an omnirt shared-memory segment");
    }
    if (name->pid != parsed.owner_pid) {
        return fail(ErrorCode::invalid_argument, "shm relay metadata 'segment' '" + parsed.segment +
                                                     "' was not created by owner_pid " +
                                                     std::to_string(owner));
    }
    OMNI_TRY(parsed.offset, read_integer(metadata, "offset", kMaxInt));
    if (parsed.kind == TransferKind::slot) {
        OMNI_TRY(std::uint64_t slot, read_integer(metadata, "slot", 0xffffffff));
        OMNI_TRY(std::uint64_t generation,
                 read_integer(metadata, "generation", SlotWord::kGenerationMask));
        OMNI_TRY(parsed.pool_id, read_integer(metadata, "pool_id", kMaxInt));
        parsed.slot = static_cast<std::uint32_t>(slot);
        parsed.generation = static_cast<std::uint32_t>(generation);
    } else {
        OMNI_TRY(std::uint64_t generation,
                 read_integer(metadata, "generation", DedicatedWord::kGenerationMask));
        OMNI_TRY(parsed.segment_id, read_integer(metadata, "segment_id", kMaxInt));
        parsed.generation = static_cast<std::uint32_t>(generation);
    }
    return parsed;
}

}  // namespace omnirt::relay::shm
