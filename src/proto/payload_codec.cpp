#include "proto/payload_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "proto/payload_header_wire.h"
#include "proto/stage_payload_wire.h"
#include "proto/tensor_ext.h"
#include "proto/wire_dom.h"
#include "proto/wire_writer.h"

namespace omnirt::proto {
namespace {

std::uint64_t align_up(std::uint64_t offset) {
    return (offset + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
}

// Fills tensor_info and buffer_bytes from the collected tensors, packed in order at aligned
// offsets.
EncodedPayload lay_out(std::vector<std::uint8_t> tree, std::vector<CollectedTensor> collected) {
    EncodedPayload encoded;
    encoded.header.tree = std::move(tree);
    encoded.header.tensor_info.reserve(collected.size());
    encoded.tensors.reserve(collected.size());
    std::uint64_t end = 0;
    for (CollectedTensor& entry : collected) {
        const Tensor& tensor = entry.tensor;
        const std::uint64_t offset = align_up(end);
        const std::uint64_t nbytes = tensor.nbytes();
        encoded.header.tensor_info.push_back(
            TensorInfo{std::move(entry.path), tensor.dtype(), tensor.shape(), offset, nbytes});
        encoded.tensors.push_back(std::move(entry.tensor));
        end = offset + nbytes;
    }
    encoded.header.buffer_bytes = end;
    return encoded;
}

std::string describe(const PayloadHeader& header, std::size_t index) {
    return "tensor_info[" + std::to_string(index) + "] (" +
           path_to_string(header.tensor_info[index].path) + ")";
}

// Checks the layout of every tensor_info entry against the buffer and makes the zero-copy
// views, in tensor_info order.
Result<std::vector<Tensor>> restore_tensors(const PayloadHeader& header, const Tensor& given,
                                            const DecodeLimits& limits) {
    const auto& infos = header.tensor_info;
    if (infos.size() > limits.max_tensors) {
        return fail(ErrorCode::out_of_range, "payload holds " + std::to_string(infos.size()) +
                                                 " tensors; the limit is " +
                                                 std::to_string(limits.max_tensors));
    }
    if (infos.empty()) {
        if (header.buffer_bytes != 0) {
            return fail(ErrorCode::invalid_argument,
                        "payload has no tensors but declares a buffer of " +
                            std::to_string(header.buffer_bytes) + " bytes");
        }
        return std::vector<Tensor>();
    }
    // Only empty tensors: there is nothing to transfer, so senders may pass no buffer at all.
    Tensor empty_buffer;
    if (!given.defined() && header.buffer_bytes == 0) {
        OMNI_TRY(empty_buffer, Tensor::empty({0}, DType::u8));
    }
    const Tensor& buffer = given.defined() ? given : empty_buffer;
    if (!buffer.defined() || buffer.dtype() != DType::u8 || buffer.dim() != 1 ||
        !buffer.is_contiguous()) {
        return fail(ErrorCode::invalid_argument,
                    "the flat buffer must be a defined, contiguous, 1-D uint8 tensor");
    }
    if (header.buffer_bytes > buffer.nbytes()) {
        return fail(ErrorCode::out_of_range,
                    "payload needs a buffer of " + std::to_string(header.buffer_bytes) +
                        " bytes but the flat buffer holds " + std::to_string(buffer.nbytes()));
    }
    const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
    std::vector<Tensor> tensors;
    tensors.reserve(infos.size());
    std::vector<std::pair<std::uint64_t, std::size_t>> ranges;  // (offset, index), non-empty
    for (std::size_t i = 0; i < infos.size(); ++i) {
        const TensorInfo& info = infos[i];
        auto numel = detail::checked_wire_numel(info.shape);
        if (!numel.has_value()) return fail(numel.error().with_context(describe(header, i)));
        const std::uint64_t element = element_size(info.dtype);
        const auto expected = static_cast<unsigned __int128>(*numel) * element;
        if (expected != info.nbytes) {
            return fail(ErrorCode::invalid_argument,
                        describe(header, i) + ": nbytes " + std::to_string(info.nbytes) +
                            " differs from the " + std::to_string(*numel) + " " +
                            std::string(to_string(info.dtype)) + " elements of its shape");
        }
        if (info.nbytes > limits.max_tensor_bytes) {
            return fail(ErrorCode::out_of_range, describe(header, i) + ": tensor of " +
                                                     std::to_string(info.nbytes) +
                                                     " bytes exceeds the limit of " +
                                                     std::to_string(limits.max_tensor_bytes));
        }
        if (info.offset > header.buffer_bytes || info.nbytes > header.buffer_bytes - info.offset) {
            return fail(ErrorCode::out_of_range,
                        describe(header, i) + ": bytes [" + std::to_string(info.offset) + ", +" +
                            std::to_string(info.nbytes) + ") lie outside the buffer of " +
                            std::to_string(header.buffer_bytes) + " bytes");
        }
        if (info.offset % element != 0 || (address + info.offset) % element != 0) {
            return fail(ErrorCode::invalid_argument,
                        describe(header, i) + ": offset " + std::to_string(info.offset) +
                            " is not aligned to the " + std::to_string(element) +
                            "-byte elements of " + std::string(to_string(info.dtype)));
        }
        if (info.dtype == DType::boolean && buffer.device().is_cpu()) {
            // Reading a bool that is neither 0 nor 1 is undefined behaviour in C++.
            const auto* bytes = reinterpret_cast<const std::uint8_t*>(buffer.data()) + info.offset;
            for (std::uint64_t k = 0; k < info.nbytes; ++k) {
                if (bytes[k] > 1) {
                    return fail(ErrorCode::invalid_argument, describe(header, i) +
                                                                 ": bool tensor holds the byte " +
                                                                 std::to_string(bytes[k]));
                }
            }
        }
        if (info.nbytes > 0) ranges.emplace_back(info.offset, i);
        OMNI_TRY(Tensor view, Tensor::from_storage(buffer.storage(), info.dtype, info.shape, {},
                                                   buffer.storage_offset() + info.offset));
        tensors.push_back(std::move(view));
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t k = 1; k < ranges.size(); ++k) {
        const TensorInfo& previous = infos[ranges[k - 1].second];
        if (previous.offset + previous.nbytes > ranges[k].first) {
            return fail(ErrorCode::invalid_argument,
                        describe(header, ranges[k - 1].second) + " and " +
                            describe(header, ranges[k].second) + " overlap in the buffer");
        }
    }
    return tensors;
}

std::string steps_to_string(std::span<const detail::PathStep> steps) {
    TensorPath path;
    for (const detail::PathStep& step : steps) {
        if (step.is_key) {
            path.emplace_back(std::string(step.key));
        } else {
            path.emplace_back(step.index);
        }
    }
    return path_to_string(path);
}

bool same_path(std::span<const detail::PathStep> steps, const TensorPath& path) {
    if (steps.size() != path.size()) return false;
    for (std::size_t i = 0; i < steps.size(); ++i) {
        if (const auto* key = std::get_if<std::string>(&path[i])) {
            if (!steps[i].is_key || steps[i].key != *key) return false;
        } else if (steps[i].is_key || steps[i].index != std::get<std::int64_t>(path[i])) {
            return false;
        }
    }
    return true;
}

// Puts tensor i where placeholder i stands, checking that it stands at tensor_info[i].path and
// that no tensor is referenced twice.
class TensorBinder final : public detail::PlaceholderBinder {
  public:
    TensorBinder(const PayloadHeader& header, std::vector<Tensor> tensors)
        : header_(header), tensors_(std::move(tensors)), bound_(tensors_.size(), false) {}

    Result<Value> bind(std::uint64_t index, std::span<const detail::PathStep> path) override {
        if (index >= tensors_.size()) {
            return fail(ErrorCode::invalid_argument,
                        "placeholder at " + steps_to_string(path) + " refers to tensor " +
                            std::to_string(index) + " but tensor_info has " +
                            std::to_string(tensors_.size()) + " entries");
        }
        const TensorInfo& info = header_.tensor_info[index];
        if (bound_[index]) {
            return fail(ErrorCode::invalid_argument,
                        describe(header_, index) + " is referenced by two placeholders, at " +
                            path_to_string(info.path) + " and " + steps_to_string(path));
        }
        if (!same_path(path, info.path)) {
            return fail(ErrorCode::invalid_argument, describe(header_, index) +
                                                         " is referenced by a placeholder at " +
                                                         steps_to_string(path));
        }
        bound_[index] = true;
        return Value(std::move(tensors_[index]));
    }

    [[nodiscard]] Status check_all_bound() const {
        for (std::size_t i = 0; i < bound_.size(); ++i) {
            if (!bound_[i]) {
                return fail(ErrorCode::invalid_argument,
                            describe(header_, i) + " is not referenced by any placeholder");
            }
        }
        return ok_status();
    }

  private:
    const PayloadHeader& header_;
    std::vector<Tensor> tensors_;
    std::vector<bool> bound_;
};

// The tree of `header` as a Dom whose root is a map, named `what` in errors.
Result<detail::Dom> parse_tree(const PayloadHeader& header, const DecodeLimits& limits,
                               std::string_view what) {
    OMNI_TRY(detail::Dom dom,
             detail::parse_dom(header.tree, limits, detail::TensorMode::placeholders));
    if (dom.at(0).kind != detail::NodeKind::map) {
        return fail(detail::type_error(what, "map", dom.at(0).kind));
    }
    return dom;
}

}  // namespace

Result<EncodedPayload> encode_payload(const StagePayload& payload) {
    std::vector<std::uint8_t> tree;
    std::vector<CollectedTensor> collected;
    detail::WireWriter writer(tree);
    detail::write_stage_payload(writer, payload, &collected);
    OMNI_RETURN_IF_ERROR(writer.status());
    return lay_out(std::move(tree), std::move(collected));
}

Result<EncodedPayload> encode_blob(const Value& chunk, const Value& metadata) {
    static const TensorPath kChunk{std::string("chunk")};
    static const TensorPath kMetadata{std::string("metadata")};
    std::vector<std::uint8_t> tree;
    std::vector<CollectedTensor> collected;
    detail::WireWriter writer(tree);
    writer.map_header(2);
    writer.str("chunk");
    writer.value(chunk, &collected, kChunk);
    writer.str("metadata");
    writer.value(metadata, &collected, kMetadata);
    OMNI_RETURN_IF_ERROR(writer.status());
    return lay_out(std::move(tree), std::move(collected));
}

Status write_tensors(const EncodedPayload& encoded, std::span<std::byte> buffer) {
    const PayloadHeader& header = encoded.header;
    OMNI_CHECK(buffer.size() >= header.buffer_bytes, "write_tensors: buffer is too small");
    OMNI_CHECK(encoded.tensors.size() == header.tensor_info.size(),
               "write_tensors: tensors and tensor_info differ in length");
    std::uint64_t end = 0;
    for (std::size_t i = 0; i < encoded.tensors.size(); ++i) {
        const Tensor& tensor = encoded.tensors[i];
        const TensorInfo& info = header.tensor_info[i];
        OMNI_CHECK(tensor.nbytes() == info.nbytes && info.offset >= end,
                   "write_tensors: tensor_info does not describe the tensors");
        if (!tensor.device().is_cpu()) {
            return fail(ErrorCode::invalid_argument,
                        describe(header, i) + " is a " + tensor.device().to_string() +
                            " tensor; write_tensors gathers host tensors only");
        }
        std::memset(buffer.data() + end, 0, info.offset - end);
        tensor.copy_to(buffer.subspan(info.offset, info.nbytes));
        end = info.offset + info.nbytes;
    }
    return ok_status();
}

Result<Tensor> make_flat_buffer(const EncodedPayload& encoded) {
    if (encoded.header.buffer_bytes > std::numeric_limits<std::int64_t>::max()) {
        return fail(ErrorCode::out_of_range, "payload buffer is too large");
    }
    OMNI_TRY(Tensor buffer,
             Tensor::empty({static_cast<std::int64_t>(encoded.header.buffer_bytes)}, DType::u8));
    OMNI_RETURN_IF_ERROR(write_tensors(
        encoded, std::span<std::byte>(buffer.mutable_data(), encoded.header.buffer_bytes)));
    return buffer;
}

Result<StagePayload> decode_payload(const PayloadHeader& header, const Tensor& flat_buffer,
                                    const DecodeLimits& limits) {
    OMNI_TRY(std::vector<Tensor> tensors, restore_tensors(header, flat_buffer, limits));
    OMNI_TRY(detail::Dom dom, parse_tree(header, limits, "payload"));
    TensorBinder binder(header, std::move(tensors));
    OMNI_TRY(StagePayload payload, detail::read_stage_payload(dom, 0, "payload", &binder));
    OMNI_RETURN_IF_ERROR(binder.check_all_bound());
    return payload;
}

Result<StreamBlob> decode_blob(const PayloadHeader& header, const Tensor& flat_buffer,
                               const DecodeLimits& limits) {
    static constexpr detail::PathStep kChunk[] = {{.key = "chunk", .is_key = true}};
    static constexpr detail::PathStep kMetadata[] = {{.key = "metadata", .is_key = true}};
    OMNI_TRY(std::vector<Tensor> tensors, restore_tensors(header, flat_buffer, limits));
    OMNI_TRY(detail::Dom dom, parse_tree(header, limits, "blob"));
    TensorBinder binder(header, std::move(tensors));
    detail::FieldReader fields(dom, 0, "blob");
    StreamBlob blob;
    OMNI_TRY(blob.chunk, fields.any("chunk", &binder, kChunk));
    OMNI_TRY(blob.metadata, fields.any("metadata", &binder, kMetadata));
    OMNI_RETURN_IF_ERROR(binder.check_all_bound());
    return blob;
}

Status encode_payload_header(const PayloadHeader& header, std::vector<std::uint8_t>& out) {
    detail::WireWriter writer(out);
    detail::write_payload_header(writer, header);
    return writer.status();
}

Result<PayloadHeader> decode_payload_header(std::span<const std::uint8_t> bytes,
                                            const DecodeLimits& limits) {
    OMNI_TRY(detail::Dom dom, detail::parse_dom(bytes, limits, detail::TensorMode::inline_data));
    if (dom.at(0).kind != detail::NodeKind::map) {
        return fail(detail::type_error("header", "map", dom.at(0).kind));
    }
    return detail::read_payload_header(dom, 0, "header");
}

}  // namespace omnirt::proto
