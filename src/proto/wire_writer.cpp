#include "proto/wire_writer.h"

#include <array>
#include <cstring>
#include <limits>

#include <msgpack/pack.hpp>

namespace omnirt::proto::detail {
namespace {

constexpr std::uint64_t kMaxMsgpackLength = std::numeric_limits<std::uint32_t>::max();

// The Stream concept of msgpack::packer: appends to the output vector.
struct VectorSink {
    std::vector<std::uint8_t>* out;
    void write(const char* data, std::size_t size) {
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(data);
        out->insert(out->end(), bytes, bytes + size);
    }
};

// A fixed-size Stream for the few bytes of a placeholder body.
struct ArraySink {
    std::array<char, 16> bytes{};
    std::size_t size = 0;
    void write(const char* data, std::size_t length) {
        OMNI_CHECK(size + length <= bytes.size(), "placeholder body overflow");
        std::memcpy(bytes.data() + size, data, length);
        size += length;
    }
};

}  // namespace

#define OMNI_PACK(call)                         \
    do {                                        \
        VectorSink sink{out_};                  \
        msgpack::packer<VectorSink>(sink).call; \
    } while (0)

Status WireWriter::status() const {
    if (error_ == nullptr) return ok_status();
    return fail(*error_);
}

void WireWriter::set_error(ErrorCode code, std::string message) {
    if (error_ == nullptr) error_ = std::make_unique<Error>(Error{code, std::move(message)});
}

void WireWriter::write(const void* data, std::size_t size) {
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    out_->insert(out_->end(), bytes, bytes + size);
}

void WireWriter::map_header(std::size_t entries) {
    if (entries > kMaxMsgpackLength) {
        return set_error(ErrorCode::out_of_range, "map of " + std::to_string(entries) +
                                                      " entries exceeds the msgpack limit");
    }
    OMNI_PACK(pack_map(static_cast<std::uint32_t>(entries)));
}

void WireWriter::list_header(std::size_t elements) {
    if (elements > kMaxMsgpackLength) {
        return set_error(ErrorCode::out_of_range, "list of " + std::to_string(elements) +
                                                      " elements exceeds the msgpack limit");
    }
    OMNI_PACK(pack_array(static_cast<std::uint32_t>(elements)));
}

void WireWriter::str(std::string_view text) {
    if (text.size() > kMaxMsgpackLength) {
        return set_error(ErrorCode::out_of_range, "string of " + std::to_string(text.size()) +
                                                      " bytes exceeds the msgpack limit");
    }
    auto size = static_cast<std::uint32_t>(text.size());
    OMNI_PACK(pack_str(size).pack_str_body(text.data(), size));
}

void WireWriter::bin(std::span<const std::uint8_t> bytes) {
    if (bytes.size() > kMaxMsgpackLength) {
        return set_error(ErrorCode::out_of_range, "bytes value of " + std::to_string(bytes.size()) +
                                                      " bytes exceeds the msgpack limit");
    }
    auto size = static_cast<std::uint32_t>(bytes.size());
    OMNI_PACK(pack_bin(size).pack_bin_body(reinterpret_cast<const char*>(bytes.data()), size));
}

void WireWriter::integer(std::int64_t number) { OMNI_PACK(pack_int64(number)); }

void WireWriter::boolean(bool flag) {
    if (flag) {
        OMNI_PACK(pack_true());
    } else {
        OMNI_PACK(pack_false());
    }
}

void WireWriter::nil() { OMNI_PACK(pack_nil()); }

void WireWriter::float64(double number) {
    // Not packer::pack_double: msgpack-c 4 writes integral doubles as ints, which would turn
    // 1.0 into 1 (and -0.0 into 0) on the other side.
    std::uint64_t bits;
    std::memcpy(&bits, &number, sizeof bits);
    std::array<std::uint8_t, 9> encoded{0xcb};
    for (int byte = 0; byte < 8; ++byte) {
        encoded[1 + byte] = static_cast<std::uint8_t>(bits >> (8 * (7 - byte)));
    }
    write(encoded.data(), encoded.size());
}

void WireWriter::ext_header(std::uint32_t size, std::int8_t type) {
    OMNI_PACK(pack_ext(size, type));
}

void WireWriter::value(const Value& value, std::vector<CollectedTensor>* collected,
                       const TensorPath& base_path) {
    std::vector<PathStep> path;
    value_at(value, collected, path, base_path);
}

void WireWriter::value_at(const Value& value, std::vector<CollectedTensor>* collected,
                          std::vector<PathStep>& path, const TensorPath& base_path) {
    switch (value.kind()) {
        case ValueKind::null:
            return nil();
        case ValueKind::boolean:
            return boolean(*value.if_bool());
        case ValueKind::integer:
            return integer(*value.if_int());
        case ValueKind::floating:
            return float64(*value.if_float());
        case ValueKind::string:
            return str(*value.if_string());
        case ValueKind::bytes:
            return bin(value.if_bytes()->data);
        case ValueKind::list: {
            const List& list = *value.if_list();
            list_header(list.size());
            for (std::size_t i = 0; i < list.size() && ok(); ++i) {
                if (collected != nullptr) path.push_back({nullptr, static_cast<std::int64_t>(i)});
                value_at(list[i], collected, path, base_path);
                if (collected != nullptr) path.pop_back();
            }
            return;
        }
        case ValueKind::map: {
            const Map& map = *value.if_map();
            map_header(map.size());
            for (const auto& [key, item] : map) {
                if (!ok()) return;
                str(key);
                if (collected != nullptr) path.push_back({&key, 0});
                value_at(item, collected, path, base_path);
                if (collected != nullptr) path.pop_back();
            }
            return;
        }
        case ValueKind::tensor:
            if (collected == nullptr) return inline_tensor(*value.if_tensor());
            return placeholder(*value.if_tensor(), *collected, path, base_path);
    }
}

void WireWriter::inline_tensor(const Tensor& tensor) {
    if (!tensor.defined()) {
        return set_error(ErrorCode::invalid_argument, "cannot encode an undefined tensor");
    }
    if (!tensor.device().is_cpu()) {
        return set_error(ErrorCode::invalid_argument,
                         "cannot encode a " + tensor.device().to_string() +
                             " tensor inline; move it to the host or send it through the relay");
    }
    const std::size_t header = 2 + 8 * tensor.dim();
    const std::size_t nbytes = tensor.nbytes();
    if (nbytes > kMaxMsgpackLength - header) {
        return set_error(ErrorCode::out_of_range, "tensor of " + std::to_string(nbytes) +
                                                      " bytes is too large to encode inline");
    }
    ext_header(static_cast<std::uint32_t>(header + nbytes), kInlineTensorExtType);
    const std::size_t start = out_->size();
    out_->resize(start + header + nbytes);
    std::uint8_t* p = out_->data() + start;
    *p++ = static_cast<std::uint8_t>(tensor.dtype());
    *p++ = static_cast<std::uint8_t>(tensor.dim());
    for (std::int64_t dim : tensor.shape()) {
        auto bits = static_cast<std::uint64_t>(dim);
        for (int byte = 0; byte < 8; ++byte) *p++ = static_cast<std::uint8_t>(bits >> (8 * byte));
    }
    tensor.copy_to(std::span<std::byte>(reinterpret_cast<std::byte*>(p), nbytes));
}

void WireWriter::placeholder(const Tensor& tensor, std::vector<CollectedTensor>& collected,
                             const std::vector<PathStep>& path, const TensorPath& base_path) {
    if (!tensor.defined()) {
        return set_error(ErrorCode::invalid_argument, "cannot encode an undefined tensor");
    }
    CollectedTensor entry{tensor, base_path};
    entry.path.reserve(base_path.size() + path.size());
    for (const PathStep& step : path) {
        if (step.key != nullptr) {
            entry.path.emplace_back(*step.key);
        } else {
            entry.path.emplace_back(step.index);
        }
    }
    const auto index = static_cast<std::uint64_t>(collected.size());
    collected.push_back(std::move(entry));
    // The ext body is the msgpack encoding of the index (at most 9 bytes): encode it into a
    // small array first, because the ext header must state its size.
    ArraySink body;
    msgpack::packer<ArraySink>(body).pack_uint64(index);
    ext_header(static_cast<std::uint32_t>(body.size), kPlaceholderExtType);
    write(body.bytes.data(), body.size);
}

#undef OMNI_PACK

}  // namespace omnirt::proto::detail
