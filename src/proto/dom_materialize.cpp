// Dom -> Value. Recursion depth is bounded by parse_dom's depth limit (at most
// kMaxSupportedDepth).
#include <cstring>
#include <limits>
#include <new>
#include <optional>

#include "proto/tensor_ext.h"
#include "proto/wire_dom.h"

namespace omnirt::proto::detail {
namespace {

class Materializer {
  public:
    Materializer(const Dom& dom, PlaceholderBinder* binder, std::span<const PathStep> prefix)
        : dom_(dom), binder_(binder), path_(prefix.begin(), prefix.end()) {}

    Value build(std::uint32_t i);
    [[nodiscard]] bool ok() const { return !error_.has_value(); }
    Error take_error() { return std::move(*error_); }

  private:
    Value inline_tensor(const Node& node);
    Value placeholder(const Node& node);
    Value fail(Error error) {
        if (!error_.has_value()) error_ = std::move(error);
        return Value();
    }

    const Dom& dom_;
    PlaceholderBinder* binder_;
    std::vector<PathStep> path_;  // maintained only when binding placeholders
    std::optional<Error> error_;
};

Value Materializer::build(std::uint32_t i) {
    const Node& node = dom_.at(i);
    switch (node.kind) {
        case NodeKind::null:
            return Value();
        case NodeKind::boolean:
            return Value(node.boolean);
        case NodeKind::integer:
            return Value(node.number.integer);
        case NodeKind::floating:
            return Value(node.number.floating);
        case NodeKind::string:
            return Value(std::string(dom_.text(node)));
        case NodeKind::bytes: {
            auto body = dom_.body(node);
            return Value(Bytes{std::vector<std::uint8_t>(body.begin(), body.end())});
        }
        case NodeKind::list: {
            List list;
            list.reserve(node.count);
            std::uint32_t child = i + 1;
            for (std::uint32_t k = 0; k < node.count && ok(); ++k, child = dom_.skip(child)) {
                if (binder_ != nullptr) path_.push_back({.index = k});
                list.push_back(build(child));
                if (binder_ != nullptr) path_.pop_back();
            }
            return Value(std::move(list));
        }
        case NodeKind::map: {
            Map map;
            std::uint32_t key = i + 1;
            for (std::uint32_t k = 0; k < node.count && ok(); ++k, key = dom_.skip(key + 1)) {
                std::string_view name = dom_.text(dom_.at(key));
                if (binder_ != nullptr) path_.push_back({.key = name, .is_key = true});
                // Keys are unique (parse_dom checked) and usually sorted: hint the end.
                map.emplace_hint(map.end(), std::string(name), build(key + 1));
                if (binder_ != nullptr) path_.pop_back();
            }
            return Value(std::move(map));
        }
        case NodeKind::inline_tensor:
            return inline_tensor(node);
        case NodeKind::placeholder:
            return placeholder(node);
    }
    return Value();
}

Value Materializer::inline_tensor(const Node& node) {
    const auto body = dom_.body(node);
    // parse_dom validated the body (the limit was applied there too).
    auto layout = parse_inline_tensor(body, std::numeric_limits<std::uint64_t>::max());
    if (!layout.has_value()) return fail(std::move(layout).error());
    auto tensor = Tensor::empty(std::move(layout->shape), layout->dtype);
    if (!tensor.has_value()) return fail(std::move(tensor).error());
    if (body.size() > layout->header_bytes) {
        std::memcpy(tensor->mutable_data(), body.data() + layout->header_bytes,
                    body.size() - layout->header_bytes);
    }
    return Value(std::move(*tensor));
}

Value Materializer::placeholder(const Node& node) {
    if (binder_ == nullptr) {
        return fail(Error{ErrorCode::internal, "tensor placeholder without a binder"});
    }
    auto bound = binder_->bind(node.number.index, path_);
    if (!bound.has_value()) return fail(std::move(bound).error());
    return std::move(*bound);
}

}  // namespace

Result<Value> materialize(const Dom& dom, std::uint32_t i, PlaceholderBinder* binder,
                          std::span<const PathStep> prefix) {
    Materializer materializer(dom, binder, prefix);
    Value value;
    try {
        value = materializer.build(i);
    } catch (const std::bad_alloc&) {
        return fail(ErrorCode::resource_exhausted, "out of memory while decoding");
    }
    if (!materializer.ok()) return fail(materializer.take_error());
    return value;
}

}  // namespace omnirt::proto::detail
