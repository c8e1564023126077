#include "proto/value_codec.h"
#include "proto/wire_writer.h"

namespace omnirt::proto {

std::string path_to_string(const TensorPath& path) {
    std::string out;
    for (const PathElement& element : path) {
        if (const auto* key = std::get_if<std::string>(&element)) {
            if (!out.empty()) out += '.';
            out += *key;
        } else {
            out += '[';
            out += std::to_string(std::get<std::int64_t>(element));
            out += ']';
        }
    }
    return out.empty() ? "<root>" : out;
}

Status encode_value(const Value& value, std::vector<std::uint8_t>& out) {
    detail::WireWriter writer(out);
    writer.value(value);
    return writer.status();
}

Result<std::vector<std::uint8_t>> encode_value(const Value& value) {
    std::vector<std::uint8_t> out;
    OMNI_RETURN_IF_ERROR(encode_value(value, out));
    return out;
}

Status encode_value_with_placeholders(const Value& value, std::vector<std::uint8_t>& out,
                                      std::vector<CollectedTensor>& tensors) {
    detail::WireWriter writer(out);
    writer.value(value, &tensors);
    return writer.status();
}

}  // namespace omnirt::proto
