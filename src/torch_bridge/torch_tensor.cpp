#include "torch_bridge/torch_tensor.h"

#include <ATen/ops/from_blob.h>

#include <string>
#include <vector>

namespace omnirt::torch_bridge {

at::Device to_torch_device(Device device) {
    if (device.kind == DeviceKind::cuda) {
        return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device.index));
    }
    return at::Device(at::kCPU);
}

Result<Device> from_torch_device(const at::Device& device) {
    if (device.is_cpu()) return Device::cpu();
    if (device.is_cuda()) return Device::cuda(device.has_index() ? device.index() : 0);
    return fail(ErrorCode::invalid_argument,
                "tensors on device '" + device.str() + "' have no omnirt equivalent (cpu, cuda)");
}

at::ScalarType to_scalar_type(DType dtype) {
    switch (dtype) {
        case DType::boolean:
            return at::kBool;
        case DType::u8:
            return at::kByte;
        case DType::i8:
            return at::kChar;
        case DType::i16:
            return at::kShort;
        case DType::i32:
            return at::kInt;
        case DType::i64:
            return at::kLong;
        case DType::f16:
            return at::kHalf;
        case DType::bf16:
            return at::kBFloat16;
        case DType::f32:
            return at::kFloat;
        case DType::f64:
            return at::kDouble;
    }
    OMNI_CHECK(false, "unknown omnirt dtype");
    return at::kByte;
}

Result<DType> from_scalar_type(at::ScalarType type) {
    switch (type) {
        case at::kBool:
            return DType::boolean;
        case at::kByte:
            return DType::u8;
        case at::kChar:
            return DType::i8;
        case at::kShort:
            return DType::i16;
        case at::kInt:
            return DType::i32;
        case at::kLong:
            return DType::i64;
        case at::kHalf:
            return DType::f16;
        case at::kBFloat16:
            return DType::bf16;
        case at::kFloat:
            return DType::f32;
        case at::kDouble:
            return DType::f64;
        default:
            return fail(ErrorCode::invalid_argument,
                        std::string("torch dtype ") + c10::toString(type) +
                            " has no omnirt equivalent (bool, uint8, int8, int16, int32, int64, "
                            "float16, bfloat16, float32, float64)");
    }
}

at::Tensor to_torch(const Tensor& tensor) {
    if (!tensor.defined()) return {};
    std::vector<std::int64_t> sizes(tensor.shape().begin(), tensor.shape().end());
    std::vector<std::int64_t> strides(tensor.strides().begin(), tensor.strides().end());
    // libtorch has no const tensors; read-only storage is documented as the caller's duty.
    void* data = const_cast<std::byte*>(tensor.data());
    auto options = at::TensorOptions()
                       .dtype(to_scalar_type(tensor.dtype()))
                       .device(to_torch_device(tensor.device()));
    // The deleter owns a reference to the storage: the memory outlives the at::Tensor and
    // every view libtorch derives from it, and is released with the last of both sides.
    std::shared_ptr<Storage> keep_alive = tensor.storage();
    return at::from_blob(
        data, sizes, strides, [keep_alive](void*) {}, options, to_torch_device(tensor.device()));
}

Result<Tensor> from_torch(const at::Tensor& tensor) {
    if (!tensor.defined()) return Tensor{};
    if (tensor.layout() != at::kStrided) {
        return fail(ErrorCode::invalid_argument,
                    "only strided torch tensors convert to omnirt tensors (got layout " +
                        c10::str(tensor.layout()) + ")");
    }
    if (tensor.is_neg() || tensor.is_conj()) {
        return fail(ErrorCode::invalid_argument,
                    "torch tensor is a lazily negated or conjugated view; call "
                    "resolve_neg()/resolve_conj() first");
    }
    OMNI_TRY(DType dtype, from_scalar_type(tensor.scalar_type()));
    OMNI_TRY(Device device, from_torch_device(tensor.device()));

    // View the whole torch storage so that the offset and strides carry over unchanged.
    const c10::Storage& torch_storage = tensor.storage();
    // const in libtorch 2.x; the wrapped storage is read-only or writable as the tensor is.
    auto* base = const_cast<std::byte*>(static_cast<const std::byte*>(torch_storage.data()));
    std::size_t storage_bytes = torch_storage.nbytes();
    std::size_t offset_bytes =
        static_cast<std::size_t>(tensor.storage_offset()) * tensor.element_size();
    at::Tensor keep_alive = tensor;
    auto storage = Storage::wrap(
        base, storage_bytes, device, [keep_alive](std::byte*) mutable { keep_alive.reset(); },
        /*read_only=*/false);
    Shape shape(tensor.sizes().begin(), tensor.sizes().end());
    std::vector<std::int64_t> strides(tensor.strides().begin(), tensor.strides().end());
    return Tensor::from_storage(std::move(storage), dtype, std::move(shape), std::move(strides),
                                offset_bytes);
}

}  // namespace omnirt::torch_bridge
