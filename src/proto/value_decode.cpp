// The public Value decoders: parse_dom (limits, syntax) then materialize.
#include "proto/value_codec.h"
#include "proto/wire_dom.h"

namespace omnirt::proto {
namespace {

// Records each placeholder with its path and leaves null in its place.
class CollectingBinder final : public detail::PlaceholderBinder {
  public:
    Result<Value> bind(std::uint64_t index, std::span<const detail::PathStep> path) override {
        TensorPlaceholder placeholder{.index = index};
        placeholder.path.reserve(path.size());
        for (const detail::PathStep& step : path) {
            if (step.is_key) {
                placeholder.path.emplace_back(std::string(step.key));
            } else {
                placeholder.path.emplace_back(step.index);
            }
        }
        placeholders.push_back(std::move(placeholder));
        return Value();
    }
    std::vector<TensorPlaceholder> placeholders;
};

}  // namespace

Result<Value> decode_value(std::span<const std::uint8_t> bytes, const DecodeLimits& limits) {
    OMNI_TRY(detail::Dom dom, detail::parse_dom(bytes, limits, detail::TensorMode::inline_data));
    return detail::materialize(dom, 0);
}

Result<DecodedValue> decode_value_with_placeholders(std::span<const std::uint8_t> bytes,
                                                    const DecodeLimits& limits) {
    OMNI_TRY(detail::Dom dom, detail::parse_dom(bytes, limits, detail::TensorMode::placeholders));
    CollectingBinder binder;
    OMNI_TRY(Value value, detail::materialize(dom, 0, &binder));
    return DecodedValue{std::move(value), std::move(binder.placeholders)};
}

}  // namespace omnirt::proto
