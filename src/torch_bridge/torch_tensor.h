#pragma once
// Zero-copy conversion between omnirt::Tensor and at::Tensor (libtorch). Neither direction
// copies bytes: the result is a view of the same memory that keeps the source's memory alive
// (the at::Tensor's deleter holds the omnirt Storage; the omnirt Storage's deleter holds the
// at::Tensor), so the memory is released only when both sides are gone.
//
// Only layers that already link libtorch include this header (engine, models, relay/gloo);
// core, control, relay (shm/ucx), pipeline and serve never do.
//
// Thread safety: both functions may be called from any thread; the views share memory, so
// the Tensor thread-safety rules (core/tensor.h) apply to both sides together.
#include <ATen/core/Tensor.h>

#include "core/error.h"
#include "core/tensor.h"

namespace omnirt::torch_bridge {

// A strided at::Tensor over `tensor`'s elements (same dtype, shape, strides and device; an
// undefined Tensor gives an undefined at::Tensor). libtorch has no read-only tensors: for a
// read-only Tensor (zero-copy relay views, same-process payloads) the caller must not write
// through the result.
[[nodiscard]] at::Tensor to_torch(const Tensor& tensor);

// A Tensor viewing `tensor`'s elements. invalid_argument for what omnirt cannot represent:
// dtypes outside bool/u8/i8/i16/i32/i64/f16/bf16/f32/f64, non-strided layouts (sparse,
// mkldnn), devices other than cpu and cuda, and lazily negated or conjugated views.
[[nodiscard]] Result<Tensor> from_torch(const at::Tensor& tensor);

// The dtype and device mappings, for code that builds options or checks a conversion up front.
[[nodiscard]] at::ScalarType to_scalar_type(DType dtype);
[[nodiscard]] Result<DType> from_scalar_type(at::ScalarType type);
[[nodiscard]] at::Device to_torch_device(Device device);
[[nodiscard]] Result<Device> from_torch_device(const at::Device& device);

}  // namespace omnirt::torch_bridge
