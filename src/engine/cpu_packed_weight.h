#pragma once
// A bfloat16 weight repacked at load for the decode kernels: 12 bits per weight instead of 16,
// lossless. A decode step of one to four rows reads every weight once and is bound by the memory
// bandwidth, so reading 3/4 of the bytes makes it faster (docs/benchmarks.md, "Packed weights").
//
// The packing: a bfloat16 is a low byte (the exponent's last bit and the 7 mantissa bits) and a
// high byte (the sign and the exponent's upper 7 bits). The low bytes are kept as they are; the
// high bytes of a weight matrix take few values (trained and random weights alike: 15 values
// held 99.99 % of the Qwen3-0.6B shape's random weights), so each is stored as a 4-bit code into
// the matrix's table of its 15 most frequent high bytes. Code 15 marks an escape: that weight's
// high byte is kept in the matrix's escape list (in row order, then position). Every value
// comes back bit for bit (NaN, infinities, zeros and subnormals included), so the packed kernel
// gives the same bits as the bfloat16 streaming kernel (engine/cpu_linear.h).
//
// Layout: rows of in / 32 blocks, each block 48 bytes for 32 weights: 32 low bytes, then 16
// bytes of codes (byte j: code of slot j in its low nibble, of slot j + 16 in its high nibble).
// Slot s holds element (s < 8 or s >= 24 ? s : s < 16 ? s + 8 : s - 8) of the block, the order
// in which the kernel's byte interleave puts them back.
//
// Thread safety: immutable after pack(); any thread.
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace omnirt::engine::cpu {

class PackedWeight {
  public:
    static constexpr std::int64_t kBlockWeights = 32;
    static constexpr std::int64_t kBlockBytes = 48;
    static constexpr std::uint8_t kEscapeCode = 15;

    // The packed copy of a bfloat16 [out, in] weight on the CPU (any strides), or of a float32 one
    // whose every value is a bfloat16 (the lower 16 bits zero: a bfloat16 checkpoint served in
    // float32, read at 1.5 bytes a weight instead of 4), or nullptr where the decode kernels
    // would not take it: another dtype or device, a float32 value that is not a bfloat16, in not
    // a multiple of 32,
    // no rows, a CPU without AVX512-BF16 / AVX512-BW / AVX512-VL, packing switched off
    // (packing_enabled()), or more than 1 weight in 256 escaping the table (the kernel's slow
    // path would cost more than the bytes saved).
    [[nodiscard]] static std::shared_ptr<const PackedWeight> pack(const at::Tensor& weight);

    // The [out, in] weight back in its dtype, bit for bit (tests and benchmarks check the
    // packing).
    [[nodiscard]] at::Tensor unpack() const;

    [[nodiscard]] at::ScalarType dtype() const { return dtype_; }
    [[nodiscard]] std::int64_t out() const { return out_; }
    [[nodiscard]] std::int64_t in() const { return in_; }
    // Bytes held (blocks, escape offsets and escapes).
    [[nodiscard]] std::int64_t bytes() const;
    [[nodiscard]] std::int64_t escape_count() const {
        return static_cast<std::int64_t>(escapes_.size());
    }

    // For the kernel: row n's blocks, the table, row n's escapes [escape_begin(n),
    // escape_begin(n + 1)).
    [[nodiscard]] const std::uint8_t* row(std::int64_t n) const {
        return blocks_.data() + n * (in_ / kBlockWeights) * kBlockBytes;
    }
    [[nodiscard]] const std::array<std::uint8_t, 16>& table() const { return table_; }
    [[nodiscard]] std::uint32_t escape_begin(std::int64_t n) const {
        return escape_begin_[static_cast<std::size_t>(n)];
    }
    [[nodiscard]] const std::uint8_t* escapes() const { return escapes_.data(); }

  private:
    PackedWeight() = default;

    at::ScalarType dtype_ = at::kBFloat16;
    std::int64_t out_ = 0;
    std::int64_t in_ = 0;
    std::array<std::uint8_t, 16> table_{};
    std::vector<std::uint8_t> blocks_;
    std::vector<std::uint32_t> escape_begin_;  // out + 1 offsets into escapes_
    std::vector<std::uint8_t> escapes_;
};

using PackedWeightPtr = std::shared_ptr<const PackedWeight>;

// Whether models pack their bfloat16 decode weights at load: yes unless the environment says
// OMNIRT_CPU_PACK=0 (read once). Packing costs 0.75x the packed matrices' bytes of memory next
// to the bfloat16 weights, which prefill keeps using.
[[nodiscard]] bool packing_enabled();

// y[m * y_stride + n] = x[m] . weight[n] for R (1..4) bfloat16 input rows and weight rows
// [n_begin, n_end) of a bfloat16 weight's packing, float32 sums in the order of the bfloat16
// streaming kernel (the same bits). Called by small_batch_linear; needs the instructions pack()
// checked.
void packed_rows_stream(int rows, const std::uint16_t* x, std::int64_t x_stride,
                        const PackedWeight& weight, std::int64_t n_begin, std::int64_t n_end,
                        float* y, std::int64_t y_stride);

// The float32 counterpart (R 1..kPackedFloatRows, a float32 weight's packing): FMA over steps
// of 16 with one accumulator per output, the order of the float32 tiles and streaming kernel.
inline constexpr int kPackedFloatRows = 8;
void packed_rows_stream_float(int rows, const float* x, std::int64_t x_stride,
                              const PackedWeight& weight, std::int64_t n_begin, std::int64_t n_end,
                              float* y, std::int64_t y_stride);

}  // namespace omnirt::engine::cpu
