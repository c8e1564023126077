#pragma once
// Every tensor of an S2-Pro checkpoint (model*.safetensors) as the release names them (fact
// sheet sections 1.3, 4.6, 5.4); PyTorch Linear weights are [out, in]:
//
//   text_model.model.embeddings.weight                       [vocab, dim] (also the tied head)
//   text_model.model.layers.{l}.attention.wqkv.weight        [(heads + 2 kv_heads) d, dim]
//   text_model.model.layers.{l}.attention.wo.weight          [dim, heads d]
//   text_model.model.layers.{l}.attention.{q,k}_norm.weight  [d] (attention_qk_norm)
//   text_model.model.layers.{l}.attention_norm.weight, ffn_norm.weight   [dim]
//   text_model.model.layers.{l}.feed_forward.w1/w3.weight    [intermediate, dim] (gate / up)
//   text_model.model.layers.{l}.feed_forward.w2.weight       [dim, intermediate] (down)
//   text_model.model.norm.weight                             [dim]
//   text_model.model.output.weight                           [vocab, dim] (only when untied)
//   audio_decoder.codebook_embeddings.weight                 [codebooks * codebook_size, dim]
//   audio_decoder.embeddings.weight                          [codebook_size, dim]
//   audio_decoder.layers.{l}.* (as above; q/k norms only with attention_qk_norm)
//   audio_decoder.norm.weight                                [dim]
//   audio_decoder.output.weight                              [codebook_size, dim] (untied)
//
// The wqkv rows are q (heads x d), then k, then v; within a head the dims are in fish-speech's
// interleaved-pair RoPE order (s2_pro_weights.h de-interleaves them for the shared stack).
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/dummy.h"
#include "checkpoint/tensor_check.h"
#include "models/s2_pro/config.h"

namespace omnirt::models::s2_pro {

inline constexpr std::string_view kTextPrefix = "text_model.model.";
inline constexpr std::string_view kAudioPrefix = "audio_decoder.";

// In module order.
[[nodiscard]] std::vector<checkpoint::ExpectedTensor> s2_pro_expected_tensors(
    const S2ProConfig& config);

// The same as dummy specs of `dtype`: norm weights centred on 1, the rest on 0.
[[nodiscard]] std::vector<checkpoint::TensorSpec> s2_pro_tensor_specs(const S2ProConfig& config,
                                                                      DType dtype);

// Parameters of every expected tensor (4,561,852,416 for the release).
[[nodiscard]] std::int64_t s2_pro_parameter_count(const S2ProConfig& config);

// ok when the checkpoint holds exactly the expected tensors; failed_precondition listing the
// missing, wrong-shape and unexpected ones otherwise.
[[nodiscard]] Status check_s2_pro_checkpoint(const S2ProConfig& config,
                                             const checkpoint::Checkpoint& checkpoint);

// parse_s2_pro_config() of the checkpoint's config.json, errors prefixed with its path.
[[nodiscard]] Result<S2ProConfig> load_s2_pro_config(const checkpoint::Checkpoint& checkpoint);

}  // namespace omnirt::models::s2_pro
