#include "proto/payload_header_wire.h"

#include <limits>

namespace omnirt::proto::detail {
namespace {

std::string element_where(const FieldReader& fields, std::string_view name, std::size_t index) {
    return fields.where(name) + "[" + std::to_string(index) + "]";
}

Result<TensorInfo> read_tensor_info(const Dom& dom, std::uint32_t map, std::string_view context,
                                    std::int64_t index) {
    FieldReader fields(dom, map, context, index, "tensor_info");
    TensorInfo info;
    OMNI_TRY(std::uint32_t path, fields.list("path"));
    info.path.reserve(dom.at(path).count);
    for (std::uint32_t step : ListChildren(dom, path)) {
        const Node& node = dom.at(step);
        if (node.kind == NodeKind::string) {
            info.path.emplace_back(std::string(dom.text(node)));
        } else if (node.kind == NodeKind::integer && node.number.integer >= 0) {
            info.path.emplace_back(node.number.integer);
        } else if (node.kind == NodeKind::integer) {
            return fail(ErrorCode::invalid_argument,
                        element_where(fields, "path", info.path.size()) +
                            ": expected a non-negative list index, got " +
                            std::to_string(node.number.integer));
        } else {
            return fail(type_error(element_where(fields, "path", info.path.size()), "string or int",
                                   node.kind));
        }
    }
    OMNI_TRY(std::string dtype_name, fields.string("dtype"));
    auto dtype = parse_dtype(dtype_name);
    if (!dtype.has_value()) return fail(dtype.error().with_context(fields.where("dtype")));
    info.dtype = *dtype;
    OMNI_TRY(std::uint32_t shape, fields.list("shape"));
    if (dom.at(shape).count > kMaxTensorDims) {
        return fail(ErrorCode::invalid_argument,
                    fields.where("shape") + ": " + std::to_string(dom.at(shape).count) +
                        " dimensions; at most " + std::to_string(kMaxTensorDims) + " are allowed");
    }
    info.shape.reserve(dom.at(shape).count);
    for (std::uint32_t dim : ListChildren(dom, shape)) {
        const Node& node = dom.at(dim);
        if (node.kind != NodeKind::integer) {
            return fail(
                type_error(element_where(fields, "shape", info.shape.size()), "int", node.kind));
        }
        if (node.number.integer < 0) {
            return fail(ErrorCode::invalid_argument,
                        element_where(fields, "shape", info.shape.size()) +
                            ": expected a non-negative int, got " +
                            std::to_string(node.number.integer));
        }
        info.shape.push_back(node.number.integer);
    }
    OMNI_TRY(info.offset, fields.non_negative("offset"));
    OMNI_TRY(info.nbytes, fields.non_negative("nbytes"));
    return info;
}

}  // namespace

void write_payload_header(WireWriter& writer, const PayloadHeader& header) {
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    for (const TensorInfo& info : header.tensor_info) {
        if (info.offset > kMax || info.nbytes > kMax) {
            writer.set_error(ErrorCode::out_of_range, "tensor_info offset or size exceeds int64");
        }
    }
    if (header.buffer_bytes > kMax) {
        writer.set_error(ErrorCode::out_of_range, "payload buffer_bytes exceeds int64");
    }
    writer.map_header(3);
    writer.str("tree");
    writer.bin(header.tree);
    writer.str("tensor_info");
    writer.list_header(header.tensor_info.size());
    for (const TensorInfo& info : header.tensor_info) {
        writer.map_header(5);
        writer.str("path");
        writer.list_header(info.path.size());
        for (const PathElement& step : info.path) {
            if (const auto* key = std::get_if<std::string>(&step)) {
                writer.str(*key);
            } else {
                writer.integer(std::get<std::int64_t>(step));
            }
        }
        writer.field("dtype", to_string(info.dtype));
        writer.str("shape");
        writer.list_header(info.shape.size());
        for (std::int64_t dim : info.shape) writer.integer(dim);
        writer.str("offset");
        writer.integer(static_cast<std::int64_t>(info.offset));
        writer.str("nbytes");
        writer.integer(static_cast<std::int64_t>(info.nbytes));
    }
    writer.str("buffer_bytes");
    writer.integer(static_cast<std::int64_t>(header.buffer_bytes));
}

Result<PayloadHeader> read_payload_header(const Dom& dom, std::uint32_t map,
                                          std::string_view context) {
    FieldReader fields(dom, map, context);
    PayloadHeader header;
    OMNI_TRY(header.tree, fields.bytes("tree"));
    OMNI_TRY(std::uint32_t infos, fields.list("tensor_info"));
    header.tensor_info.reserve(dom.at(infos).count);
    for (std::uint32_t item : ListChildren(dom, infos)) {
        const auto index = static_cast<std::int64_t>(header.tensor_info.size());
        if (dom.at(item).kind != NodeKind::map) {
            return fail(type_error(element_where(fields, "tensor_info", header.tensor_info.size()),
                                   "map", dom.at(item).kind));
        }
        OMNI_TRY(TensorInfo info, read_tensor_info(dom, item, context, index));
        header.tensor_info.push_back(std::move(info));
    }
    OMNI_TRY(header.buffer_bytes, fields.non_negative("buffer_bytes"));
    return header;
}

}  // namespace omnirt::proto::detail
