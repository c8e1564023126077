#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>

namespace omnirt {

Storage::Storage(std::byte* data, std::size_t nbytes, Device device, Deleter deleter,
                 bool read_only)
    : data_(data),
      nbytes_(nbytes),
      device_(device),
      deleter_(std::move(deleter)),
      read_only_(read_only) {}

Storage::~Storage() {
    if (deleter_) deleter_(data_);
}

Result<std::shared_ptr<Storage>> Storage::allocate(std::size_t nbytes) {
    // Round up so aligned_alloc gets a multiple of the alignment; keep at least one block so
    // that zero-byte tensors still have a valid (unique) pointer.
    std::size_t rounded = (nbytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
    if (rounded == 0) rounded = kTensorAlignment;
    if (rounded < nbytes) {
        return fail(ErrorCode::resource_exhausted,
                    "tensor of " + std::to_string(nbytes) + " bytes is too large to allocate");
    }
    void* memory = std::aligned_alloc(kTensorAlignment, rounded);
    if (memory == nullptr) {
        return fail(ErrorCode::resource_exhausted,
                    "out of memory allocating a tensor of " + std::to_string(nbytes) + " bytes");
    }
    std::memset(memory, 0, rounded);
    return std::shared_ptr<Storage>(new Storage(
        static_cast<std::byte*>(memory), nbytes, Device::cpu(), [](std::byte* p) { std::free(p); },
        false));
}

std::shared_ptr<Storage> Storage::wrap(std::byte* data, std::size_t nbytes, Device device,
                                       Deleter deleter, bool read_only) {
    return std::shared_ptr<Storage>(
        new Storage(data, nbytes, device, std::move(deleter), read_only));
}

std::vector<std::int64_t> contiguous_strides(const Shape& shape) {
    std::vector<std::int64_t> strides(shape.size());
    std::int64_t running = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = running;
        // Saturates instead of overflowing for shapes whose element count is zero but whose
        // other dimensions multiply past int64 (such a tensor has no element to address).
        if (__builtin_mul_overflow(running, shape[i] > 0 ? shape[i] : 1, &running)) {
            running = std::numeric_limits<std::int64_t>::max();
        }
    }
    return strides;
}

Result<std::int64_t> checked_numel(const Shape& shape) {
    if (shape.size() > kMaxTensorDims) {
        return fail(ErrorCode::out_of_range, "tensor has " + std::to_string(shape.size()) +
                                                 " dimensions; at most " +
                                                 std::to_string(kMaxTensorDims) + " are allowed");
    }
    std::int64_t numel = 1;
    for (std::int64_t d : shape) {
        if (d < 0) {
            return fail(ErrorCode::invalid_argument,
                        "tensor dimension " + std::to_string(d) + " is negative");
        }
        if (d != 0 && numel > std::numeric_limits<std::int64_t>::max() / d) {
            return fail(ErrorCode::out_of_range, "tensor element count overflows");
        }
        numel *= d;
    }
    return numel;
}

Result<Tensor> Tensor::empty(Shape shape, DType dtype) {
    OMNI_TRY(std::int64_t numel, checked_numel(shape));
    std::size_t size = omnirt::element_size(dtype);
    if (static_cast<std::uint64_t>(numel) > std::numeric_limits<std::size_t>::max() / size) {
        return fail(ErrorCode::out_of_range, "tensor byte size overflows");
    }
    OMNI_TRY(auto storage, Storage::allocate(static_cast<std::size_t>(numel) * size));
    return from_storage(std::move(storage), dtype, std::move(shape));
}

Result<Tensor> Tensor::from_storage(std::shared_ptr<Storage> storage, DType dtype, Shape shape,
                                    std::vector<std::int64_t> strides, std::size_t offset_bytes) {
    if (!storage) return fail(ErrorCode::invalid_argument, "tensor storage is null");
    OMNI_TRY(std::int64_t numel, checked_numel(shape));
    if (strides.empty()) strides = contiguous_strides(shape);
    if (strides.size() != shape.size()) {
        return fail(ErrorCode::invalid_argument, "tensor strides and shape differ in length");
    }
    // The largest element offset reachable through the strides must stay inside the storage.
    std::size_t size = omnirt::element_size(dtype);
    if (offset_bytes > storage->nbytes()) {
        return fail(ErrorCode::out_of_range, "tensor offset is past the end of its storage");
    }
    if (numel > 0) {
        unsigned __int128 last = 0;
        for (std::size_t i = 0; i < shape.size(); ++i) {
            if (strides[i] < 0) {
                return fail(ErrorCode::invalid_argument,
                            "negative tensor strides are not supported");
            }
            last += static_cast<unsigned __int128>(shape[i] - 1) *
                    static_cast<unsigned __int128>(strides[i]);
        }
        unsigned __int128 end = offset_bytes + (last + 1) * size;
        if (end > storage->nbytes()) {
            return fail(ErrorCode::out_of_range, "tensor view of " + std::to_string(numel) + " " +
                                                     std::string(to_string(dtype)) +
                                                     " elements does not fit its storage of " +
                                                     std::to_string(storage->nbytes()) + " bytes");
        }
    }
    Tensor tensor;
    tensor.storage_ = std::move(storage);
    tensor.offset_ = offset_bytes;
    tensor.shape_ = std::move(shape);
    tensor.strides_ = std::move(strides);
    tensor.dtype_ = dtype;
    return tensor;
}

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

std::int64_t Tensor::numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape_) n *= d;
    return n;
}

bool Tensor::is_contiguous() const {
    if (numel() == 0) return true;  // no element to lay out
    std::int64_t expected = 1;
    for (std::size_t i = shape_.size(); i-- > 0;) {
        if (shape_[i] != 1 && strides_[i] != expected) return false;
        expected *= shape_[i];
    }
    return true;
}

bool Tensor::read_only() const { return storage_ && storage_->read_only(); }

const std::byte* Tensor::data() const {
    OMNI_CHECK(defined(), "data() on an undefined tensor");
    return storage_->data() + offset_;
}

std::byte* Tensor::mutable_data() const {
    OMNI_CHECK(defined(), "mutable_data() on an undefined tensor");
    OMNI_CHECK(!storage_->read_only(), "mutable_data() on a read-only tensor");
    return storage_->data() + offset_;
}

void Tensor::copy_to(std::span<std::byte> destination) const {
    OMNI_CHECK(destination.size() == nbytes(), "copy_to: destination size differs from nbytes()");
    OMNI_CHECK(device().is_cpu(), "copy_to: host tensors only");
    if (destination.empty()) return;
    if (is_contiguous()) {
        std::memcpy(destination.data(), data(), destination.size());
        return;
    }
    // Gather row by row along the innermost dimension.
    const std::size_t size = element_size();
    const std::size_t dims = shape_.size();
    const std::int64_t inner = shape_[dims - 1];
    const std::int64_t inner_stride = strides_[dims - 1];
    std::vector<std::int64_t> index(dims, 0);
    std::byte* out = destination.data();
    const std::byte* base = data();
    std::int64_t rows = numel() / inner;
    for (std::int64_t row = 0; row < rows; ++row) {
        std::int64_t offset = 0;
        for (std::size_t d = 0; d + 1 < dims; ++d) offset += index[d] * strides_[d];
        const std::byte* src = base + offset * static_cast<std::int64_t>(size);
        if (inner_stride == 1) {
            std::memcpy(out, src, static_cast<std::size_t>(inner) * size);
            out += static_cast<std::size_t>(inner) * size;
        } else {
            for (std::int64_t i = 0; i < inner; ++i) {
                std::memcpy(out, src + i * inner_stride * static_cast<std::int64_t>(size), size);
                out += size;
            }
        }
        for (std::size_t d = dims - 1; d-- > 0;) {
            if (++index[d] < shape_[d]) break;
            index[d] = 0;
        }
    }
}

Result<Tensor> Tensor::contiguous() const {
    if (is_contiguous()) return *this;
    return clone();
}

Result<Tensor> Tensor::clone() const {
    OMNI_TRY(Tensor copy, empty(shape_, dtype_));
    copy_to(std::span<std::byte>(copy.mutable_data(), copy.nbytes()));
    return copy;
}

bool Tensor::equals(const Tensor& other) const {
    if (defined() != other.defined()) return false;
    if (!defined()) return true;
    if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
    if (!device().is_cpu() || !other.device().is_cpu()) return false;
    std::vector<std::byte> a(nbytes()), b(other.nbytes());
    copy_to(a);
    other.copy_to(b);
    return a == b;
}

}  // namespace omnirt
