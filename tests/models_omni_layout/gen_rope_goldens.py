#!/usr/bin/env python3
"""Regenerates rope_goldens.json from transformers' own Qwen3-Omni code.

Reads each case's inputs (prompt_ids with one pad per media item, and media in prompt order)
from the JSON file, runs transformers' processor rule
(Qwen3OmniMoeProcessor.replace_multimodal_special_tokens) for the expanded ids and the model's
get_rope_index for the 3-D position ids and rope_delta, and writes them back with "source" naming
the transformers version. The C++ test (rope_goldens_test.cpp) then checks omnirt against them.

Needs torch, numpy and a transformers with qwen3_omni_moe (4.57 or later; 5.x tested by
reading). No weights and no tokenizer are loaded: both functions run on stand-in objects that
carry the config values (special ids, position_id_per_seconds, spatial_merge_size), and text is
spelled with the special token strings plus "[t<id>]" for any other token.

Usage: python3 gen_rope_goldens.py [--in FILE] [--out FILE]   (both default to rope_goldens.json
beside this script)
"""
import argparse
import inspect
import json
import re
import types
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as modeling
from transformers.models.qwen3_omni_moe import processing_qwen3_omni_moe as processing

TOKEN_STRINGS = {
    "image_token_id": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
    "audio_token_id": "<|audio_pad|>",
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
    "audio_start_token_id": "<|audio_start|>",
    "audio_end_token_id": "<|audio_end|>",
}


def call_with_supported(fn, *args, **kwargs):
    """Calls fn with the keyword arguments its signature names (they moved between versions)."""
    params = inspect.signature(fn).parameters
    return fn(*args, **{k: v for k, v in kwargs.items() if k in params})


def to_text(ids, id_to_string):
    return "".join(id_to_string.get(i, f"[t{i}]") for i in ids)


def to_ids(text, string_to_id):
    out = []
    for match in re.finditer(r"<\|[a-z_]+\|>|\[t(-?\d+)\]", text):
        out.append(int(match.group(1)) if match.group(1) is not None else string_to_id[match.group(0)])
    assert "".join(m.group(0) for m in re.finditer(r"<\|[a-z_]+\|>|\[t(-?\d+)\]", text)) == text
    return out


def hf_media_lists(media):
    """transformers' per-kind lists; its one audio list holds standalone audios and video
    soundtracks in prompt order."""
    images, videos, seconds, audios = [], [], [], []
    with_audio = set()
    for item in media:
        if item["kind"] == "image":
            images.append(item["grid_thw"])
        elif item["kind"] == "audio":
            audios.append(item["mel_frames"])
        else:
            videos.append(item["grid_thw"])
            seconds.append(item.get("second_per_grid", 2.0))
            with_audio.add("audio_mel_frames" in item)
            if "audio_mel_frames" in item:
                audios.append(item["audio_mel_frames"])
    if len(with_audio) > 1:
        raise ValueError("transformers' use_audio_in_video is one flag: all videos of a case "
                         "must have a soundtrack, or none")
    return images, videos, seconds, audios, with_audio == {True}


def expand(case, config):
    id_to_string = {config[key]: s for key, s in TOKEN_STRINGS.items()}
    string_to_id = {s: i for i, s in id_to_string.items()}
    images, videos, seconds, audios, use_audio_in_video = hf_media_lists(case["media"])
    merge = config["spatial_merge_size"]
    stand_in = types.SimpleNamespace(
        image_token=TOKEN_STRINGS["image_token_id"],
        video_token=TOKEN_STRINGS["video_token_id"],
        audio_token=TOKEN_STRINGS["audio_token_id"],
        vision_bos_token=TOKEN_STRINGS["vision_start_token_id"],
        vision_eos_token=TOKEN_STRINGS["vision_end_token_id"],
        audio_bos_token=TOKEN_STRINGS["audio_start_token_id"],
        audio_eos_token=TOKEN_STRINGS["audio_end_token_id"],
        image_processor=types.SimpleNamespace(merge_size=merge),
        video_processor=types.SimpleNamespace(merge_size=merge, temporal_patch_size=2),
    )
    audio_lengths = processing._get_feat_extract_output_lengths(np.array(audios, dtype=np.int64))
    [text] = call_with_supported(
        processing.Qwen3OmniMoeProcessor.replace_multimodal_special_tokens,
        stand_in,
        [to_text(case["prompt_ids"], id_to_string)],
        audio_lengths=iter(audio_lengths),
        image_grid_thw=iter(np.array(images, dtype=np.int64).reshape(-1, 3)),
        video_grid_thw=iter(np.array(videos, dtype=np.int64).reshape(-1, 3)),
        video_second_per_grid=iter(seconds),
        use_audio_in_video=use_audio_in_video,
        position_id_per_seconds=float(config["position_id_per_seconds"]),
        seconds_per_chunk=2.0,
    )
    return to_ids(text, string_to_id)


def rope_index(expanded_ids, case, config):
    images, videos, seconds, audios, use_audio_in_video = hf_media_lists(case["media"])
    owner = getattr(modeling, "Qwen3OmniMoeThinkerForConditionalGeneration")
    stand_in = types.SimpleNamespace(
        spatial_merge_size=config["spatial_merge_size"],
        config=types.SimpleNamespace(
            **{key: config[key] for key in TOKEN_STRINGS},
            position_id_per_seconds=config["position_id_per_seconds"],
            seconds_per_chunk=2,
            audio_config=types.SimpleNamespace(n_window=50),
        ),
    )
    for helper in ("get_llm_pos_ids_for_vision", "get_chunked_index"):
        if hasattr(owner, helper):
            setattr(stand_in, helper, types.MethodType(getattr(owner, helper), stand_in))
    input_ids = torch.tensor([expanded_ids], dtype=torch.long)
    position_ids, deltas = call_with_supported(
        owner.get_rope_index,
        stand_in,
        input_ids=input_ids,
        image_grid_thw=torch.tensor(images, dtype=torch.long) if images else None,
        video_grid_thw=torch.tensor(videos, dtype=torch.long) if videos else None,
        attention_mask=torch.ones_like(input_ids),
        use_audio_in_video=use_audio_in_video,
        audio_seqlens=torch.tensor(audios, dtype=torch.long) if audios else None,
        second_per_grids=torch.tensor(seconds) if seconds else None,  # float32, as the processor's
    )
    return position_ids[:, 0, :].tolist(), float(deltas.reshape(-1)[0].item())


def dump(doc):
    """JSON with every array of numbers on one line."""
    text = json.dumps(doc, indent=1)
    return re.sub(r"\[\s*(-?[0-9][-0-9.e+,\s]*?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                  text) + "\n"


def main():
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--in", dest="source", default=here / "rope_goldens.json", type=Path)
    parser.add_argument("--out", default=here / "rope_goldens.json", type=Path)
    args = parser.parse_args()
    doc = json.loads(args.source.read_text())
    config = doc["config"]
    for case in doc["cases"]:
        case["expanded_ids"] = expand(case, config)
        case["position_ids"], case["rope_delta"] = rope_index(case["expanded_ids"], case, config)
    doc["source"] = (f"transformers {transformers.__version__}: "
                     "Qwen3OmniMoeProcessor.replace_multimodal_special_tokens and "
                     "Qwen3OmniMoeThinkerForConditionalGeneration.get_rope_index")
    doc["note"] = "Generated by gen_rope_goldens.py from the transformers version in source."
    args.out.write_text(dump(doc))
    print(f"wrote {len(doc['cases'])} cases to {args.out}")


if __name__ == "__main__":
    main()
