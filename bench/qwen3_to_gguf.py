#!/usr/bin/env python3
"""Write a Hugging Face Qwen3 (dense) checkpoint as an F32 GGUF, with numpy and gguf-py only.

Used by bench/llama_cpp_side_by_side.sh. llama.cpp's convert_hf_to_gguf.py imports torch and
reads the vocabulary through transformers' AutoTokenizer; Debian 12 packages neither
transformers nor a torch that convert_hf_to_gguf.py supports, so this writes the same GGUF
layout (tensor names from gguf-py's TensorNameMap, the keys the converter's Qwen3Model
writes, a gpt2/qwen2 BPE vocabulary) reading the safetensors with gguf-py's own reader.

The output is always F32: every bfloat16, float16 or float32 weight converts exactly. The
caller makes a BF16 copy with llama-quantize (exact again for weights that were bfloat16).

Usage: qwen3_to_gguf.py GGUF_PY_DIR CHECKPOINT_DIR OUT.gguf
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def load_tensor(local_tensor) -> np.ndarray:
    raw = local_tensor.mmap_bytes()
    if local_tensor.dtype == "BF16":
        bits = raw.view(np.uint16).astype(np.uint32) << 16
        array = bits.view(np.float32)
    elif local_tensor.dtype == "F16":
        array = raw.view(np.float16).astype(np.float32)
    elif local_tensor.dtype == "F32":
        array = np.array(raw.view(np.float32))
    else:
        raise SystemExit(f"qwen3_to_gguf: unsupported safetensors dtype {local_tensor.dtype}")
    return array.reshape(local_tensor.shape)


def safetensors_files(checkpoint: Path) -> list[Path]:
    index = checkpoint / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        return [checkpoint / name for name in sorted(set(weight_map.values()))]
    return [checkpoint / "model.safetensors"]


def add_vocabulary(gguf, writer, checkpoint: Path, vocab_size: int) -> None:
    """The converter's _set_vocab_gpt2: ids without a token become [PADi] (UNUSED)."""
    tokenizer = json.loads((checkpoint / "tokenizer.json").read_text(encoding="utf-8"))
    model = tokenizer["model"]
    if model.get("type") != "BPE":
        raise SystemExit("qwen3_to_gguf: tokenizer.json is not a BPE tokenizer")
    by_id: dict[int, tuple[str, int]] = {}
    for text, token_id in model["vocab"].items():
        by_id[token_id] = (text, gguf.TokenType.NORMAL)
    for added in tokenizer.get("added_tokens", []):
        kind = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
        by_id[added["id"]] = (added["content"], kind)
    if max(by_id) >= vocab_size:
        raise SystemExit("qwen3_to_gguf: the tokenizer has ids beyond config.json's vocab_size")
    tokens, types = [], []
    for token_id in range(vocab_size):
        text, kind = by_id.get(token_id, (f"[PAD{token_id}]", gguf.TokenType.UNUSED))
        tokens.append(text)
        types.append(kind)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    special = gguf.SpecialVocab(checkpoint, load_merges=True, n_vocab=vocab_size)
    special.add_to_gguf(writer)


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    sys.path.insert(0, sys.argv[1])
    import gguf  # the gguf-py of the llama.cpp tree that will read the file

    checkpoint, out = Path(sys.argv[2]), Path(sys.argv[3])
    config = json.loads((checkpoint / "config.json").read_text())
    if config.get("model_type") != "qwen3":
        raise SystemExit(f"qwen3_to_gguf: model_type {config.get('model_type')!r}, expected qwen3")
    blocks = config["num_hidden_layers"]
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]

    writer = gguf.GGUFWriter(out, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.QWEN3],
                             use_temp_file=True)
    writer.add_name(checkpoint.name)
    writer.add_block_count(blocks)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_freq_base(config["rope_theta"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_vocabulary(gguf, writer, checkpoint, config["vocab_size"])

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3, blocks)
    count = 0
    for path in safetensors_files(checkpoint):
        with gguf.utility.SafetensorsLocal(path) as tensors:
            for hf_name, local_tensor in tensors.items():
                if hf_name == "lm_head.weight" and config.get("tie_word_embeddings"):
                    continue
                name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
                if name is None:
                    raise SystemExit(f"qwen3_to_gguf: no GGUF name for tensor {hf_name}")
                writer.add_tensor(name, load_tensor(local_tensor))
                count += 1

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"qwen3_to_gguf: {out}: {count} tensors, F32", file=sys.stderr)


if __name__ == "__main__":
    main()
