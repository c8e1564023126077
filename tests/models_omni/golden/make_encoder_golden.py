# Golden outputs of transformers' Qwen3-Omni audio and vision encoders at tiny random sizes
# (the configs of tests/models_omni/encoder_test_support.h), float32 on the CPU.
# Writes weights.safetensors (checkpoint names) and io.safetensors (inputs and outputs) to argv[1].
import sys, torch
from safetensors.torch import save_file
from transformers.models.qwen3_omni_moe import configuration_qwen3_omni_moe as C
from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as M
torch.manual_seed(0)
a = C.Qwen3OmniMoeAudioEncoderConfig(num_mel_bins=128, d_model=32, encoder_layers=2,
    encoder_attention_heads=4, encoder_ffn_dim=64, downsample_hidden_size=8, n_window=50,
    n_window_infer=800, conv_chunksize=500, max_source_positions=1500, output_dim=24)
v = C.Qwen3OmniMoeVisionEncoderConfig(depth=3, hidden_size=32, num_heads=4, intermediate_size=48,
    in_channels=3, patch_size=16, temporal_patch_size=2, spatial_merge_size=2,
    num_position_embeddings=2304, out_hidden_size=24, deepstack_visual_indexes=[0, 2],
    hidden_act="gelu_pytorch_tanh")
am, vm = M.Qwen3OmniMoeAudioEncoder(a).eval(), M.Qwen3OmniMoeVisionEncoder(v).eval()
W = {}
for prefix, m in (("thinker.audio_tower.", am), ("thinker.visual.", vm)):
    for n, p in m.named_parameters():
        d = torch.randn_like(p)
        # Matrices N(0, 1/fan_in); biases N(0, 0.04); norm weights 1 + N(0, 0.04).
        p.data = d / p[0].numel() ** 0.5 if p.dim() > 1 else d / 5 + float(n.endswith("weight"))
    W.update({prefix + k: t.contiguous() for k, t in m.state_dict().items()})
io = {}
lens = [37, 101, 250]
mels = [torch.randn(128, n) for n in lens]
with torch.no_grad():
    out = am(torch.cat(mels, 1), feature_lens=torch.tensor(lens)).last_hidden_state
    io["audio_batch"] = out
    io["audio_alone_37"] = am(mels[0], feature_lens=torch.tensor([37])).last_hidden_state
    grid = torch.tensor([[1, 4, 6], [2, 2, 2]])
    pix = torch.rand(int(grid.prod(1).sum()), 1536) * 2 - 1
    r = vm(pix, grid_thw=grid)
    if isinstance(r, tuple):
        emb, ds = r[0], r[1]
    else:
        emb, ds = r.pooler_output, r.deepstack_features
    io["vision_embeddings"] = emb
    for k, t in enumerate(ds):
        io[f"vision_deepstack_{k}"] = t
for i, m in enumerate(mels):
    io[f"mel_{i}"] = m
io["pixels"] = pix
save_file(W, sys.argv[1] + "/weights.safetensors")
save_file({k: t.contiguous() for k, t in io.items()}, sys.argv[1] + "/io.safetensors")
print({k: tuple(t.shape) for k, t in io.items()}, len(W))
