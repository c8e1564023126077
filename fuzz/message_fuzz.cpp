// Fuzzes control message decoding. Anything that decodes must re-encode and decode to the same
// message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "proto/messages.h"

namespace {

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "message_fuzz: %s\n", what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace omnirt;
    auto message = proto::decode_message(std::span<const std::uint8_t>(data, size));
    if (!message.has_value()) {
        if (message.error().message.empty()) die("an error without a message");
        return 0;
    }
    auto encoded = proto::encode_message(*message);
    if (!encoded.has_value()) die("a decoded message does not encode");
    auto again = proto::decode_message(*encoded);
    if (!again.has_value()) die("a re-encoded message does not decode");
    if (!(*again == *message)) die("round trip changed the message");
    if (proto::message_type_name(*again) != proto::message_type_name(*message)) die("type changed");
    return 0;
}
