#include "relay/relay.h"

namespace omnirt::relay {

Result<Tensor> Relay::allocate_send_buffer(std::size_t nbytes) {
    return Tensor::empty({static_cast<std::int64_t>(nbytes)}, DType::u8);
}

Result<CommonMetadata> read_common_metadata(const Value& metadata, std::string_view backend) {
    if (!metadata.is_map()) {
        return fail(ErrorCode::invalid_argument,
                    "relay metadata must be a map, got " + std::string(to_string(metadata.kind())));
    }
    const Value* name = metadata.find("backend");
    if (name == nullptr || !name->is_string()) {
        return fail(ErrorCode::invalid_argument, "relay metadata has no 'backend' string");
    }
    if (name->as_string() != backend) {
        return fail(ErrorCode::invalid_argument, "relay metadata was written by backend '" +
                                                     name->as_string() + "' but this relay is '" +
                                                     std::string(backend) + "'");
    }
    const Value* nbytes = metadata.find("nbytes");
    if (nbytes == nullptr || !nbytes->is_int() || nbytes->as_int() < 0) {
        return fail(ErrorCode::invalid_argument,
                    "relay metadata has no non-negative integer 'nbytes'");
    }
    return CommonMetadata{name->as_string(), static_cast<std::size_t>(nbytes->as_int())};
}

}  // namespace omnirt::relay
