"""Mixtures of experts at DeepSeek-V3 scale, whole process, against a dense model of the same run.

Run by hand: `python bench/bench_moe.py`. Each step a fresh process, wall time and peak RSS (the
child's rusage), in a temporary folder:

    DeepSeek-V3 (671 B, 256 routed experts in 58 MoE blocks) TP 2 x PP 4 x EP 4 x DP 8 with --sp,
        64 ranks, --stages 16,15,15,15 (61 blocks), 1,024-token sequences: translate to Chakra
        traces, inspect the trace set, inspect the configuration
    Qwen3-30B-A3B (128 experts in 48 blocks) TP 2 x EP 4 x DP 8 with --sp: translate

and, as the baseline measured in the same run, Llama-3-70B (dense) translated at TP 2 x PP 4 x DP 8
(the same 64 ranks, a model with a tenth of the parameters and no experts). Issue 26's goals, on 2
cores: DeepSeek-V3 translate <= 10 s and <= 500 MB, its inspect <= 2 s; Qwen3-30B-A3B <= 3 s.

Latest (2026-12-02, 2e76242, the project's 2-core VM): DeepSeek-V3 translates in 5.9 s and 361
MB (its 64 traces 118 MB), inspect 0.9 s of the set and 1.7 s of the configuration; Qwen3-30B-A3B
1.3 s. Earlier figures: docs/performance.md (History).

The configurations are the published config.json files' keys (deepseek-ai/DeepSeek-V3,
Qwen/Qwen3-30B-A3B on the Hugging Face Hub).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from children import run  # bench/children.py: the script's own folder is on sys.path

DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
    "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "vocab_size": 129280, "max_position_embeddings": 163840, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}  # fmt: skip
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48,
    "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
    "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
    "max_position_embeddings": 40960, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def main() -> None:
    modtrans = [sys.executable, "-m", "modtrans"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "dsv3.json").write_text(json.dumps(DEEPSEEK_V3))
        (folder / "qwen3.json").write_text(json.dumps(QWEN3_30B_A3B))
        layout = ["--tp", "2", "--pp", "4", "--dp", "8", "--seq-len", "1024", "--format", "chakra-et"]
        dense = run([*modtrans, "translate", "llama-3-70b", *layout, "-o", str(folder / "l")])
        moe_layout = [*layout, "--sp", "--ep", "4", "--stages", "16,15,15,15"]
        deepseek = run(
            [*modtrans, "translate", str(folder / "dsv3.json"), *moe_layout, "-o", str(folder / "d")]
        )
        size = sum(p.stat().st_size for p in folder.glob("d.*"))
        inspect_set = run([*modtrans, "inspect", str(folder / "d")])
        inspect_model = run([*modtrans, "inspect", str(folder / "dsv3.json")])
        qwen_layout = [
            "--tp",
            "2",
            "--sp",
            "--ep",
            "4",
            "--dp",
            "8",
            "--seq-len",
            "1024",
            "--format",
            "chakra-et",
        ]
        qwen = run(
            [*modtrans, "translate", str(folder / "qwen3.json"), *qwen_layout, "-o", str(folder / "q")]
        )
    print(f"baseline: llama-3-70b, 64 ranks, translate:  {dense[0]:6.2f} s, {dense[1]:6.0f} MB peak")
    rows = (
        ("deepseek-v3, 64 ranks, translate", deepseek, "<= 10 s, <= 500 MB"),
        ("deepseek-v3, inspect of its traces", inspect_set, "<= 2 s"),
        ("deepseek-v3, inspect of its config", inspect_model, "<= 2 s"),
        ("qwen3-30b-a3b, 64 ranks, translate", qwen, "<= 3 s"),
    )
    for label, (seconds, rss), goal in rows:
        print(
            f"{label:<40} {seconds:6.2f} s, {rss:6.0f} MB, {seconds / dense[0]:4.2f}x the baseline ({goal})"
        )
    print(f"deepseek-v3's trace set: {size / 1e6:,.0f} MB")


if __name__ == "__main__":
    main()
