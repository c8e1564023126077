#include "models/qwen3_omni/vision_encoder.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "torch_bridge/torch_errors.h"

namespace omnirt::models::qwen3_omni {
namespace {

// Bounds a grid side so that products of sizes stay far from overflow (a 16-pixel patch grid of
// 65536 is a million pixels a side).
constexpr std::int64_t kMaxGridSide = 1 << 16;

std::string block_name(std::int64_t index) { return "blocks." + std::to_string(index) + "."; }

Result<VisionEncoder::Block> read_block(const VisionEncoderConfig& config,
                                        const EncoderWeightReader& reader, std::int64_t index) {
    const std::string prefix = block_name(index);
    const std::int64_t hidden = config.hidden_size;
    VisionEncoder::Block block;
    OMNI_TRY(block.norm1, read_layer_norm(reader, prefix + "norm1", hidden, "hidden_size"));
    OMNI_TRY(block.norm2, read_layer_norm(reader, prefix + "norm2", hidden, "hidden_size"));
    OMNI_TRY(block.qkv, read_linear(reader, prefix + "attn.qkv", 3 * hidden, hidden,
                                    "3 * hidden_size, hidden_size"));
    OMNI_TRY(block.proj,
             read_linear(reader, prefix + "attn.proj", hidden, hidden, "hidden_size, hidden_size"));
    OMNI_TRY(block.fc1, read_linear(reader, prefix + "mlp.linear_fc1", config.intermediate_size,
                                    hidden, "intermediate_size, hidden_size"));
    OMNI_TRY(block.fc2, read_linear(reader, prefix + "mlp.linear_fc2", hidden,
                                    config.intermediate_size, "hidden_size, intermediate_size"));
    return block;
}

Result<VisionEncoder::Merger> read_merger(const VisionEncoderConfig& config,
                                          const EncoderWeightReader& reader,
                                          const std::string& name, bool norm_after_grouping) {
    const std::int64_t merged = config.merged_hidden_size();
    VisionEncoder::Merger merger;
    merger.norm_after_grouping = norm_after_grouping;
    OMNI_TRY(merger.norm,
             read_layer_norm(
                 reader, name + ".ln_q", norm_after_grouping ? merged : config.hidden_size,
                 norm_after_grouping ? "hidden_size * spatial_merge_size^2" : "hidden_size"));
    OMNI_TRY(merger.fc1, read_linear(reader, name + ".mlp.0", merged, merged,
                                     "hidden_size * spatial_merge_size^2 (twice)"));
    OMNI_TRY(merger.fc2, read_linear(reader, name + ".mlp.2", config.out_hidden_size, merged,
                                     "out_hidden_size, hidden_size * spatial_merge_size^2"));
    return merger;
}

at::Tensor rotate_half(const at::Tensor& x) {
    const std::int64_t half = x.size(-1) / 2;
    return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// q or k [tokens, heads, d] rotated in float32 with cos / sin [tokens, d], cast back.
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    const at::Tensor x32 = x.to(at::kFloat);
    return (x32 * cos.unsqueeze(1) + rotate_half(x32) * sin.unsqueeze(1)).to(x.scalar_type());
}

}  // namespace

at::Tensor vision_patch_coordinates(const GridThw& grid, std::int64_t merge_size) {
    const std::int64_t blocks_h = grid.h / merge_size;
    const std::int64_t blocks_w = grid.w / merge_size;
    const at::Tensor inner = at::arange(merge_size, at::kLong);
    // [blocks_h, blocks_w, merge, merge] row / col of each patch.
    const at::Tensor rows = (at::arange(blocks_h, at::kLong).view({-1, 1, 1, 1}) * merge_size +
                             inner.view({1, 1, -1, 1}))
                                .expand({blocks_h, blocks_w, merge_size, merge_size})
                                .reshape({-1});
    const at::Tensor cols = (at::arange(blocks_w, at::kLong).view({1, -1, 1, 1}) * merge_size +
                             inner.view({1, 1, 1, -1}))
                                .expand({blocks_h, blocks_w, merge_size, merge_size})
                                .reshape({-1});
    return at::stack({rows, cols}, 1).repeat({grid.t, 1});
}

at::Tensor interpolated_position_embedding(const at::Tensor& table, const GridThw& grid,
                                           std::int64_t merge_size) {
    const auto side = static_cast<std::int64_t>(std::llround(std::sqrt(table.size(0))));
    const at::TensorOptions index_options = at::TensorOptions(at::kLong).device(table.device());
    // Source coordinates of the target rows / columns (align_corners), in float32.
    const at::Tensor source_rows = at::linspace(0, static_cast<double>(side - 1), grid.h);
    const at::Tensor source_cols = at::linspace(0, static_cast<double>(side - 1), grid.w);
    const at::Tensor row_floor = source_rows.to(at::kInt).to(at::kLong);
    const at::Tensor col_floor = source_cols.to(at::kInt).to(at::kLong);
    const at::Tensor row_ceil = (row_floor + 1).clamp_max(side - 1);
    const at::Tensor col_ceil = (col_floor + 1).clamp_max(side - 1);
    const at::Tensor dh = source_rows - row_floor;  // float32
    const at::Tensor dw = source_cols - col_floor;
    // The four taps of every (row, col), row-major over the grid.
    auto taps = [&](const at::Tensor& rows, const at::Tensor& cols) {
        return (rows.unsqueeze(1) * side + cols.unsqueeze(0)).reshape({-1}).to(index_options);
    };
    auto weight = [&](const at::Tensor& row_weight, const at::Tensor& col_weight) {
        return (row_weight.unsqueeze(1) * col_weight.unsqueeze(0))
            .reshape({-1, 1})
            .to(table.options());
    };
    const at::Tensor embedded =
        table.index_select(0, taps(row_floor, col_floor)) * weight(1 - dh, 1 - dw) +
        table.index_select(0, taps(row_floor, col_ceil)) * weight(1 - dh, dw) +
        table.index_select(0, taps(row_ceil, col_floor)) * weight(dh, 1 - dw) +
        table.index_select(0, taps(row_ceil, col_ceil)) * weight(dh, dw);
    // Row-major [h, w] -> merge-block order, repeated for every temporal group.
    const std::int64_t hidden = table.size(1);
    return embedded.view({grid.h / merge_size, merge_size, grid.w / merge_size, merge_size, hidden})
        .permute({0, 2, 1, 3, 4})
        .reshape({-1, hidden})
        .repeat({grid.t, 1});
}

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::load(const VisionEncoderConfig& config,
                                                           const WeightLookup& lookup,
                                                           VisionEncoderOptions options) {
    OMNI_RETURN_IF_ERROR(validate(config));
    OMNI_RETURN_IF_ERROR(
        check_encoder_dtype("Qwen3-Omni vision encoder", options.dtype, options.device));
    const EncoderWeightReader reader(lookup, options.prefix, options.dtype, options.device);
    const std::int64_t hidden = config.hidden_size;
    Weights weights;
    try {
        OMNI_TRY(const at::Tensor patch_weight,
                 reader.get("patch_embed.proj.weight",
                            {hidden, config.in_channels, config.temporal_patch_size,
                             config.patch_size, config.patch_size},
                            "hidden_size, in_channels, temporal_patch_size, patch_size x2"));
        weights.patch_embed.weight = patch_weight.reshape({hidden, config.patch_features()});
        OMNI_TRY(weights.patch_embed.bias,
                 reader.get("patch_embed.proj.bias", {hidden}, "hidden_size"));
        OMNI_TRY(weights.position_table,
                 reader.get("pos_embed.weight", {config.num_position_embeddings, hidden},
                            "num_position_embeddings, hidden_size"));
        weights.blocks.reserve(static_cast<std::size_t>(config.depth));
        for (std::int64_t index = 0; index < config.depth; ++index) {
            OMNI_TRY(Block block, read_block(config, reader, index));
            weights.blocks.push_back(std::move(block));
        }
        OMNI_TRY(weights.merger, read_merger(config, reader, "merger", false));
        for (std::size_t k = 0; k < config.deepstack_visual_indexes.size(); ++k) {
            OMNI_TRY(Merger merger,
                     read_merger(config, reader, "merger_list." + std::to_string(k), true));
            weights.deepstack_mergers.push_back(std::move(merger));
        }
        // transformers' Qwen3OmniMoeVisionRotaryEmbedding(head_dim / 2, theta).
        const std::int64_t dim = config.head_dim() / 2;
        weights.inverse_frequencies =
            (1.0 / at::pow(config.rope_theta, at::arange(0, dim, 2, at::kFloat) / dim))
                .to(options.device);
    } catch (const std::exception&) {
        return fail(ErrorCode::resource_exhausted, "Qwen3-Omni vision encoder: cannot load: " +
                                                       torch_bridge::current_exception_text());
    }
    return std::unique_ptr<VisionEncoder>(
        new VisionEncoder(config, std::move(options), std::move(weights)));
}

Status VisionEncoder::check_input(const at::Tensor& pixel_values,
                                  const std::vector<GridThw>& grids) const {
    const std::string what = "Qwen3-Omni vision encoder: ";
    if (grids.empty()) return fail(ErrorCode::invalid_argument, what + "no image or video given");
    const std::int64_t merge = config_.spatial_merge_size;
    std::int64_t patches = 0;
    for (std::size_t i = 0; i < grids.size(); ++i) {
        const GridThw& grid = grids[i];
        const std::string shown = "(" + std::to_string(grid.t) + ", " + std::to_string(grid.h) +
                                  ", " + std::to_string(grid.w) + ")";
        if (grid.t < 1 || grid.h < 1 || grid.w < 1 || grid.t > kMaxGridSide ||
            grid.h > kMaxGridSide || grid.w > kMaxGridSide) {
            return fail(ErrorCode::invalid_argument, what + "grid " + std::to_string(i) + " " +
                                                         shown + " must have sizes in [1, " +
                                                         std::to_string(kMaxGridSide) + "]");
        }
        if (grid.h % merge != 0 || grid.w % merge != 0) {
            return fail(ErrorCode::invalid_argument,
                        what + "grid " + std::to_string(i) + " " + shown +
                            ": h and w must be multiples of spatial_merge_size " +
                            std::to_string(merge));
        }
        patches += grid.patches();
        if (patches > std::numeric_limits<std::int32_t>::max()) {
            return fail(ErrorCode::invalid_argument, what + "too many patches in one batch");
        }
    }
    if (!pixel_values.defined() || pixel_values.dim() != 2 || pixel_values.size(0) != patches ||
        pixel_values.size(1) != config_.patch_features() ||
        !at::isFloatingType(pixel_values.scalar_type())) {
        return fail(ErrorCode::invalid_argument,
                    what + "pixel_values must be floating [" + std::to_string(patches) + ", " +
                        std::to_string(config_.patch_features()) +
                        "] (the grids' patches, in_channels * temporal_patch_size * patch_size^2)");
    }
    return ok_status();
}

at::Tensor VisionEncoder::merge(const Merger& merger, const at::Tensor& x) const {
    const std::int64_t merged = config_.merged_hidden_size();
    const double eps = config_.layer_norm_eps;
    const at::Tensor grouped = merger.norm_after_grouping
                                   ? layer_norm(x.reshape({-1, merged}), merger.norm, eps)
                                   : layer_norm(x, merger.norm, eps).reshape({-1, merged});
    return linear(at::gelu(linear(grouped, merger.fc1)), merger.fc2);
}

void VisionEncoder::block(const Block& weights, at::Tensor& x, const at::Tensor& cos,
                          const at::Tensor& sin, const std::vector<std::int64_t>& segments) const {
    const std::int64_t tokens = x.size(0);
    const std::int64_t heads = config_.num_heads;
    const std::int64_t head_dim = config_.head_dim();
    const double eps = config_.layer_norm_eps;
    // [tokens, 3, heads, d]: q, k, v.
    const at::Tensor qkv =
        linear(layer_norm(x, weights.norm1, eps), weights.qkv).view({tokens, 3, heads, head_dim});
    const at::Tensor q = apply_rotary(qkv.select(1, 0), cos, sin);
    const at::Tensor k = apply_rotary(qkv.select(1, 1), cos, sin);
    const at::Tensor v = qkv.select(1, 2);
    const at::Tensor attended =
        segment_attention(q, k, v, segments, 1.0 / std::sqrt(static_cast<double>(head_dim)));
    x = x + linear(attended, weights.proj);
    at::Tensor hidden = linear(layer_norm(x, weights.norm2, eps), weights.fc1);
    hidden = config_.hidden_act == "gelu" ? at::gelu(hidden) : at::gelu(hidden, "tanh");
    x = x + linear(hidden, weights.fc2);
}

Result<std::vector<VisionItemOutput>> VisionEncoder::forward(
    const at::Tensor& pixel_values, const std::vector<GridThw>& grids) const {
    OMNI_RETURN_IF_ERROR(check_input(pixel_values, grids));
    try {
        c10::NoGradGuard no_grad;
        const std::int64_t merge_size = config_.spatial_merge_size;
        const at::TensorOptions options = at::TensorOptions(options_.dtype).device(options_.device);
        // Steps 1-2.
        at::Tensor x = linear(pixel_values.to(options), weights_.patch_embed);
        std::vector<at::Tensor> positions;
        std::vector<at::Tensor> coordinates;
        std::vector<std::int64_t> segments;
        for (const GridThw& grid : grids) {
            positions.push_back(
                interpolated_position_embedding(weights_.position_table, grid, merge_size));
            coordinates.push_back(vision_patch_coordinates(grid, merge_size));
            for (std::int64_t group = 0; group < grid.t; ++group)
                segments.push_back(grid.h * grid.w);
        }
        x = x + at::cat(positions);
        // Step 3: angles [tokens, head_dim / 2] = [row * f, col * f], then twice over head_dim.
        const at::Tensor coordinate = at::cat(coordinates).to(options_.device).to(at::kFloat);
        const at::Tensor& frequencies = weights_.inverse_frequencies;
        const at::Tensor angles =
            at::cat({coordinate.select(1, 0).unsqueeze(1) * frequencies.unsqueeze(0),
                     coordinate.select(1, 1).unsqueeze(1) * frequencies.unsqueeze(0)},
                    1);
        const at::Tensor doubled = at::cat({angles, angles}, 1);
        const at::Tensor cos = doubled.cos();
        const at::Tensor sin = doubled.sin();
        // Steps 4-6.
        const std::vector<std::int64_t>& taps = config_.deepstack_visual_indexes;
        std::vector<at::Tensor> deepstack;
        for (std::int64_t index = 0; index < config_.depth; ++index) {
            block(weights_.blocks[static_cast<std::size_t>(index)], x, cos, sin, segments);
            const auto tap = std::find(taps.begin(), taps.end(), index);
            if (tap != taps.end()) {
                const auto k = static_cast<std::size_t>(tap - taps.begin());
                deepstack.push_back(merge(weights_.deepstack_mergers[k], x));
            }
        }
        const at::Tensor embeddings = merge(weights_.merger, x);
        std::vector<VisionItemOutput> outputs(grids.size());
        std::int64_t start = 0;
        for (std::size_t i = 0; i < grids.size(); ++i) {
            const std::int64_t rows = grids[i].patches() / config_.merge_unit();
            outputs[i].embeddings = embeddings.narrow(0, start, rows);
            for (const at::Tensor& feature : deepstack) {
                outputs[i].deepstack.push_back(feature.narrow(0, start, rows));
            }
            start += rows;
        }
        return outputs;
    } catch (const std::exception&) {
        return fail(ErrorCode::internal, "Qwen3-Omni vision encoder: forward failed: " +
                                             torch_bridge::current_exception_text());
    }
}

}  // namespace omnirt::models::qwen3_omni
