#pragma once
// Tensor: a typed, strided view over shared byte storage. The storage carries a custom deleter
// so that relay slots, mapped files and foreign allocators (libtorch) can back a tensor without
// a copy. Copying a Tensor shares the storage; it never copies bytes.
//
// Thread safety: a Tensor may be read from several threads; writing through mutable_data()
// while other threads read is the caller's responsibility. Read-only storage (zero-copy relay
// views, same-process payloads) refuses mutable_data().
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace omnirt {

using Shape = std::vector<std::int64_t>;

inline constexpr std::size_t kTensorAlignment = 64;
inline constexpr std::size_t kMaxTensorDims = 16;

class Storage {
  public:
    using Deleter = std::function<void(std::byte*)>;

    // Zero-filled, kTensorAlignment-aligned host memory.
    [[nodiscard]] static Result<std::shared_ptr<Storage>> allocate(std::size_t nbytes);
    // Takes ownership of [data, data + nbytes); `deleter` runs when the last reference goes.
    [[nodiscard]] static std::shared_ptr<Storage> wrap(std::byte* data, std::size_t nbytes,
                                                       Device device, Deleter deleter,
                                                       bool read_only);

    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    ~Storage();

    [[nodiscard]] std::byte* data() const { return data_; }
    [[nodiscard]] std::size_t nbytes() const { return nbytes_; }
    [[nodiscard]] Device device() const { return device_; }
    [[nodiscard]] bool read_only() const { return read_only_; }

  private:
    Storage(std::byte* data, std::size_t nbytes, Device device, Deleter deleter, bool read_only);

    std::byte* data_;
    std::size_t nbytes_;
    Device device_;
    Deleter deleter_;
    bool read_only_;
};

class Tensor {
  public:
    Tensor() = default;  // undefined tensor: defined() is false

    // A new contiguous zero-filled host tensor.
    [[nodiscard]] static Result<Tensor> empty(Shape shape, DType dtype);
    // A view over `storage`; strides in elements (empty = contiguous). Fails when the view would
    // reach outside the storage or the shape is invalid.
    [[nodiscard]] static Result<Tensor> from_storage(std::shared_ptr<Storage> storage, DType dtype,
                                                     Shape shape,
                                                     std::vector<std::int64_t> strides = {},
                                                     std::size_t offset_bytes = 0);
    // A contiguous host tensor holding a copy of `values`.
    template <class T>
    [[nodiscard]] static Tensor from_vector(const std::vector<T>& values, Shape shape = {});

    [[nodiscard]] bool defined() const { return storage_ != nullptr; }
    [[nodiscard]] DType dtype() const { return dtype_; }
    [[nodiscard]] const Shape& shape() const { return shape_; }
    [[nodiscard]] const std::vector<std::int64_t>& strides() const { return strides_; }
    [[nodiscard]] std::size_t dim() const { return shape_.size(); }
    [[nodiscard]] Device device() const;
    [[nodiscard]] std::int64_t numel() const;
    [[nodiscard]] std::size_t element_size() const { return omnirt::element_size(dtype_); }
    // Bytes of the elements (numel * element size), not of the storage.
    [[nodiscard]] std::size_t nbytes() const {
        return static_cast<std::size_t>(numel()) * element_size();
    }
    [[nodiscard]] bool is_contiguous() const;
    [[nodiscard]] bool read_only() const;
    [[nodiscard]] const std::shared_ptr<Storage>& storage() const { return storage_; }
    [[nodiscard]] std::size_t storage_offset() const { return offset_; }

    // First element. Host tensors only for element access through typed pointers.
    [[nodiscard]] const std::byte* data() const;
    [[nodiscard]] std::byte* mutable_data() const;  // aborts on read-only storage
    template <class T>
    [[nodiscard]] const T* data_as() const {
        OMNI_CHECK(DTypeOf<T>::value == dtype_, "tensor dtype does not match the requested type");
        return reinterpret_cast<const T*>(data());
    }

    // Writes the elements in row-major order into `destination` (exactly nbytes() long),
    // gathering strided layouts. Host tensors only.
    void copy_to(std::span<std::byte> destination) const;
    // This tensor when already contiguous, otherwise a contiguous copy.
    [[nodiscard]] Result<Tensor> contiguous() const;
    // The same elements in a fresh writable contiguous host tensor.
    [[nodiscard]] Result<Tensor> clone() const;
    // Same dtype, shape and element bytes (devices must be cpu).
    [[nodiscard]] bool equals(const Tensor& other) const;

  private:
    std::shared_ptr<Storage> storage_;
    std::size_t offset_ = 0;
    Shape shape_;
    std::vector<std::int64_t> strides_;
    DType dtype_ = DType::f32;
};

// Row-major strides (in elements) of a contiguous tensor of `shape`.
[[nodiscard]] std::vector<std::int64_t> contiguous_strides(const Shape& shape);
// numel of `shape` with overflow and negative-dimension checks.
[[nodiscard]] Result<std::int64_t> checked_numel(const Shape& shape);

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape) {
    if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
    auto tensor = empty(std::move(shape), DTypeOf<T>::value);
    OMNI_CHECK(tensor.has_value(), "from_vector: invalid shape");
    OMNI_CHECK(static_cast<std::size_t>(tensor->numel()) == values.size(),
               "from_vector: shape does not match the number of values");
    if constexpr (std::is_same_v<T, bool>) {
        auto* out = reinterpret_cast<bool*>(tensor->mutable_data());
        for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
    } else if (!values.empty()) {
        std::memcpy(tensor->mutable_data(), values.data(), values.size() * sizeof(T));
    }
    return *tensor;
}

}  // namespace omnirt
