#include "relay/gloo/c10d_metadata.h"

#include "relay/relay.h"

#include <limits>

namespace omnirt::relay {
namespace {

auto invalid(std::string_view backend, const std::string& reason) {
    return fail(ErrorCode::invalid_argument, std::string(backend) + " relay metadata " + reason);
}

Result<std::int64_t> read_int(const Value& metadata, std::string_view backend,
                              std::string_view key) {
    const Value* field = metadata.find(key);
    if (field == nullptr || !field->is_int()) {
        return fail(
            ErrorCode::invalid_argument,
            std::string(backend) + " relay metadata has no integer '" + std::string(key) + "'");
    }
    return field->as_int();
}

Result<std::int64_t> read_rank(const Value& metadata, std::string_view backend,
                               std::string_view key, std::int64_t world_size) {
    OMNI_TRY(std::int64_t rank, read_int(metadata, backend, key));
    if (rank < 0 || rank >= world_size) {
        return fail(ErrorCode::invalid_argument,
                    std::string(backend) + " relay metadata '" + std::string(key) + "' is " +
                        std::to_string(rank) + ", outside the process group of " +
                        std::to_string(world_size) + " ranks");
    }
    return rank;
}

Result<Shape> read_shape(const Value& metadata, std::string_view backend) {
    const Value* field = metadata.find("shape");
    const List* list = field != nullptr ? field->if_list() : nullptr;
    if (list == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    std::string(backend) + " relay metadata has no 'shape' list");
    }
    Shape shape;
    for (const Value& dim : *list) {
        const std::int64_t* size = dim.if_int();
        if (size == nullptr || *size < 0) {
            return fail(
                ErrorCode::invalid_argument,
                std::string(backend) + " relay metadata 'shape' must hold non-negative integers");
        }
        shape.push_back(*size);
    }
    return shape;
}

}  // namespace

Value to_metadata(const C10dMetadata& transfer) {
    List shape;
    for (std::int64_t dim : transfer.shape) shape.emplace_back(dim);
    Map map;
    map["backend"] = transfer.backend;
    map["group"] = transfer.group;
    map["nbytes"] = static_cast<std::int64_t>(transfer.nbytes);
    map["src_rank"] = transfer.src_rank;
    map["dst_rank"] = transfer.dst_rank;
    map["tag"] = transfer.tag;
    map["dtype"] = std::string(to_string(transfer.dtype));
    map["shape"] = std::move(shape);
    return Value(std::move(map));
}

Result<C10dMetadata> parse_metadata(const Value& metadata, std::string_view backend,
                                    std::string_view group, std::int64_t receiver_rank,
                                    std::int64_t world_size) {
    OMNI_TRY(CommonMetadata common, read_common_metadata(metadata, backend));
    C10dMetadata transfer;
    transfer.backend = std::move(common.backend);
    transfer.nbytes = common.nbytes;

    const Value* group_field = metadata.find("group");
    if (group_field == nullptr || !group_field->is_string()) {
        return invalid(backend, "has no 'group' string");
    }
    if (group_field->as_string() != group) {
        return invalid(backend, "belongs to process group '" + group_field->as_string() +
                                    "', not to this relay's group '" + std::string(group) +
                                    "' (metadata of an earlier or another pipeline instance?)");
    }
    transfer.group = group_field->as_string();

    OMNI_TRY(transfer.src_rank, read_rank(metadata, backend, "src_rank", world_size));
    OMNI_TRY(transfer.dst_rank, read_rank(metadata, backend, "dst_rank", world_size));
    if (transfer.dst_rank != receiver_rank) {
        return invalid(backend, "addresses rank " + std::to_string(transfer.dst_rank) +
                                    " but this relay is rank " + std::to_string(receiver_rank));
    }
    if (transfer.src_rank == receiver_rank) {
        return invalid(
            backend, "names this relay's own rank " + std::to_string(receiver_rank) + " as sender");
    }
    OMNI_TRY(transfer.tag, read_int(metadata, backend, "tag"));
    if (transfer.tag < 0 || transfer.tag >= kC10dTagLimit) {
        return invalid(backend, "'tag' " + std::to_string(transfer.tag) + " is outside [0, 2^31)");
    }

    const Value* dtype_field = metadata.find("dtype");
    if (dtype_field == nullptr || !dtype_field->is_string()) {
        return invalid(backend, "has no 'dtype' string");
    }
    auto dtype = parse_dtype(dtype_field->as_string());
    if (!dtype) return fail(dtype.error().with_context(std::string(backend) + " relay metadata"));
    transfer.dtype = *dtype;
    OMNI_TRY(transfer.shape, read_shape(metadata, backend));
    auto numel = checked_numel(transfer.shape);
    if (!numel) return fail(numel.error().with_context(std::string(backend) + " relay metadata"));
    if (static_cast<std::uint64_t>(*numel) >
            std::numeric_limits<std::size_t>::max() / element_size(transfer.dtype) ||
        static_cast<std::size_t>(*numel) * element_size(transfer.dtype) != transfer.nbytes) {
        return invalid(backend, "says " + std::to_string(transfer.nbytes) +
                                    " bytes but its dtype and shape do not "
                                    "account for exactly that many");
    }
    return transfer;
}

}  // namespace omnirt::relay
