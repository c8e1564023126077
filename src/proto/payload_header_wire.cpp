#include "proto/payload_header_wire.h"

#include <limits>

namespace omnirt::proto::detail {
namespace {

std::string element_where(const FieldReader& fields, std::string_view name, std::size_t index) {
    return fields.where(name) + "[" + std::to_string(index) + "]";
}

Result<TensorInfo> read_tensor_info(Map& map, std::string_view context, std::int64_t index) {
    FieldReader fields(map, context, index, "tensor_info");
    TensorInfo info;
    OMNI_TRY(List * path, fields.list("path"));
    info.path.reserve(path->size());
    for (std::size_t i = 0; i < path->size(); ++i) {
        Value& step = (*path)[i];
        if (const std::string* key = step.if_string()) {
            info.path.emplace_back(std::move(const_cast<std::string&>(*key)));
        } else if (const std::int64_t* position = step.if_int()) {
            if (*position < 0) {
                return fail(ErrorCode::invalid_argument,
                            element_where(fields, "path", i) +
                                ": expected a non-negative list index, got " +
                                std::to_string(*position));
            }
            info.path.emplace_back(*position);
        } else {
            return fail(element_type_error(element_where(fields, "path", i), "string or int", step));
        }
    }
    OMNI_TRY(std::string dtype_name, fields.string("dtype"));
    auto dtype = parse_dtype(dtype_name);
    if (!dtype.has_value()) return fail(dtype.error().with_context(fields.where("dtype")));
    info.dtype = *dtype;
    OMNI_TRY(List * shape, fields.list("shape"));
    if (shape->size() > kMaxTensorDims) {
        return fail(ErrorCode::invalid_argument,
                    fields.where("shape") + ": " + std::to_string(shape->size()) +
                        " dimensions; at most " + std::to_string(kMaxTensorDims) +
                        " are allowed");
    }
    info.shape.reserve(shape->size());
    for (std::size_t i = 0; i < shape->size(); ++i) {
        const Value& dim = (*shape)[i];
        const std::int64_t* size = dim.if_int();
        if (size == nullptr) {
            return fail(element_type_error(element_where(fields, "shape", i), "int", dim));
        }
        if (*size < 0) {
            return fail(ErrorCode::invalid_argument,
                        element_where(fields, "shape", i) +
                            ": expected a non-negative int, got " + std::to_string(*size));
        }
        info.shape.push_back(*size);
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

Result<PayloadHeader> read_payload_header(Map& map, std::string_view context) {
    FieldReader fields(map, context);
    PayloadHeader header;
    OMNI_TRY(header.tree, fields.bytes("tree"));
    OMNI_TRY(List * infos, fields.list("tensor_info"));
    header.tensor_info.reserve(infos->size());
    for (std::size_t i = 0; i < infos->size(); ++i) {
        Value& item = (*infos)[i];
        Map* info_map = item.if_map();
        if (info_map == nullptr) {
            return fail(element_type_error(element_where(fields, "tensor_info", i), "map", item));
        }
        OMNI_TRY(TensorInfo info, read_tensor_info(*info_map, context, static_cast<std::int64_t>(i)));
        header.tensor_info.push_back(std::move(info));
    }
    OMNI_TRY(header.buffer_bytes, fields.non_negative("buffer_bytes"));
    return header;
}

}  // namespace omnirt::proto::detail
