// Fuzzes the Value decoder (both tensor modes). Anything that decodes must re-encode to bytes
// that decode to the same tree, and encoding must be deterministic.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "proto/value_codec.h"

namespace {

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "value_fuzz: %s\n", what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace omnirt;
    const std::span<const std::uint8_t> bytes(data, size);
    auto value = proto::decode_value(bytes);
    if (value.has_value()) {
        auto encoded = proto::encode_value(*value);
        if (!encoded.has_value()) die("a decoded value does not encode");
        auto again = proto::decode_value(*encoded);
        if (!again.has_value()) die("a re-encoded value does not decode");
        if (!(*again == *value)) die("round trip changed the value");
        auto twice = proto::encode_value(*again);
        if (!twice.has_value() || *twice != *encoded) die("encoding is not deterministic");
    } else if (value.error().message.empty()) {
        die("an error without a message");
    }
    auto tree = proto::decode_value_with_placeholders(bytes, proto::DecodeLimits::control());
    if (tree.has_value() &&
        tree->placeholders.size() > proto::DecodeLimits::control().max_tensors) {
        die("more placeholders than the limit allows");
    }
    return 0;
}
