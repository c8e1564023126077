#pragma once
// VisionEncoder: Qwen3-Omni's vision encoder (`thinker.visual.*`) in libtorch, with its DeepStack
// mergers. Patches of a batch of images / videos in; per item the embeddings that replace its
// image / video pad tokens, [t * h * w / merge_unit, out_hidden_size], and one DeepStack feature
// matrix of the same shape per deepstack_visual_indexes entry (added to the thinker's hidden
// states after its first layers).
//
// Input (the processor's): pixel_values [sum of t * h * w, in_channels * temporal_patch_size *
// patch_size^2] (1536), one row per patch; grids (t, h, w) in patch units per item. Inside an
// item, rows run over temporal groups, then 2x2 merge blocks row-major, then the block's patches
// row-major ("merge-block order"), so every merge_unit consecutive rows form one thinker token.
//
// Forward (transformers' Qwen3OmniMoeVisionEncoder):
//   1. patch embed: Conv3d with kernel == stride == the patch, i.e. a linear map of the row;
//   2. + learned positions: the side x side table (48 x 48) bilinearly resampled to h x w
//      (align_corners: target row r samples source r * (side - 1) / (h - 1)), in merge-block
//      order, the same for every temporal group;
//   3. 2-D rotary: head_dim / 2 frequencies 1 / theta^(2i / (head_dim / 2)); per patch the
//      angles [row * f, col * f] twice over head_dim, rotate-half on q and k in float32;
//   4. depth blocks: x += proj(attention(norm1(x))), x += fc2(act(fc1(norm2(x)))), attention
//      bidirectional inside each temporal group of each item (h * w patches), never across;
//   5. after each block listed in deepstack_visual_indexes: merger_list[k] (LayerNorm over the
//      merge_unit patches grouped into one row, then mlp.0 -> GELU -> mlp.2);
//   6. merger on the last block's output (LayerNorm per patch, then grouped, then the MLP).
// Attention never crosses items, so an item's result does not depend on the rest of the batch.
//
// Weights (prefix `thinker.visual.` by default):
//   patch_embed.proj.{weight [hidden, C, tp, p, p], bias [hidden]}, pos_embed.weight [side^2,
//   hidden], blocks.{i}.{norm1, norm2}.{weight, bias}, blocks.{i}.attn.qkv.{weight [3 * hidden,
//   hidden], bias}, blocks.{i}.attn.proj, blocks.{i}.mlp.linear_fc1 / linear_fc2,
//   merger.ln_q [hidden], merger.mlp.0 [4h, 4h], merger.mlp.2 [out, 4h],
//   merger_list.{k}.ln_q [4h], merger_list.{k}.mlp.0 / mlp.2.
//
// dtype and device as AudioEncoder (audio_encoder.h): weights converted once, activations in the
// compute dtype, positions and rotary angles made in float32.
//
// Thread safety: immutable after load(); forward() may run on several threads at once.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/qwen3_omni/encoder_config.h"
#include "models/qwen3_omni/encoder_layers.h"
#include "models/qwen3_omni/grid.h"

namespace omnirt::models::qwen3_omni {

inline constexpr std::string_view kVisionEncoderPrefix = "thinker.visual.";

struct VisionEncoderOptions {
    at::ScalarType dtype = at::kFloat;
    at::Device device = at::kCPU;
    std::string prefix = std::string(kVisionEncoderPrefix);
};

struct VisionItemOutput {
    at::Tensor embeddings;              // [patches / merge_unit, out_hidden_size]
    std::vector<at::Tensor> deepstack;  // per tap, in block order: same shape as embeddings
};

// (row, col) in patch units of every patch of `grid`, in merge-block order: int64 [patches, 2].
[[nodiscard]] at::Tensor vision_patch_coordinates(const GridThw& grid, std::int64_t merge_size);

// Step 2 for one item: `table` [side^2, hidden] resampled to the grid, [patches, hidden] in
// merge-block order, in the table's dtype (bilinear weights rounded to it, as transformers does).
[[nodiscard]] at::Tensor interpolated_position_embedding(const at::Tensor& table,
                                                         const GridThw& grid,
                                                         std::int64_t merge_size);

class VisionEncoder {
  public:
    // As AudioEncoder::load (audio_encoder.h).
    [[nodiscard]] static Result<std::unique_ptr<VisionEncoder>> load(
        const VisionEncoderConfig& config, const WeightLookup& lookup,
        VisionEncoderOptions options = {});

    // One output per grid, in order. invalid_argument for no grid, a grid with a non-positive
    // size or h / w not multiples of spatial_merge_size, pixel_values not [sum of patches,
    // patch_features()] floating; internal when libtorch fails.
    [[nodiscard]] Result<std::vector<VisionItemOutput>> forward(
        const at::Tensor& pixel_values, const std::vector<GridThw>& grids) const;

    [[nodiscard]] const VisionEncoderConfig& config() const { return config_; }
    [[nodiscard]] at::ScalarType dtype() const { return options_.dtype; }
    [[nodiscard]] at::Device device() const { return options_.device; }

    struct Block {
        LayerNormWeights norm1, norm2;
        LinearWeights qkv, proj, fc1, fc2;
    };
    struct Merger {
        LayerNormWeights norm;   // ln_q: [hidden] (final merger) or [merge_unit * hidden]
        LinearWeights fc1, fc2;  // mlp.0, mlp.2
        bool norm_after_grouping = false;
    };
    struct Weights {
        LinearWeights patch_embed;  // weight [hidden, patch_features]
        at::Tensor position_table;  // [side^2, hidden]
        std::vector<Block> blocks;
        Merger merger;
        std::vector<Merger> deepstack_mergers;
        at::Tensor inverse_frequencies;  // float32 [head_dim / 4]
    };

  private:
    VisionEncoder(VisionEncoderConfig config, VisionEncoderOptions options, Weights weights)
        : config_(std::move(config)), options_(std::move(options)), weights_(std::move(weights)) {}

    [[nodiscard]] Status check_input(const at::Tensor& pixel_values,
                                     const std::vector<GridThw>& grids) const;
    [[nodiscard]] at::Tensor merge(const Merger& merger, const at::Tensor& x) const;
    void block(const Block& weights, at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
               const std::vector<std::int64_t>& segments) const;

    VisionEncoderConfig config_;
    VisionEncoderOptions options_;
    Weights weights_;
};

}  // namespace omnirt::models::qwen3_omni
