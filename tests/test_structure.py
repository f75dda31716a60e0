"""Each layer's block (index and part) in the IR, from the configuration reader and from ONNX
extraction alike; the pipeline cut reads it, not the layer names (issue 23, structure in the IR)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from modtrans import llm, pipeline
from modtrans.ir import document
from modtrans.ir.document import Block, Heads, ModelIR, Part
from modtrans.strategy.llm.stages import block_of, blocks


def _ir(spec: str) -> ModelIR:
    ir, found = pipeline.extract_checked(spec)
    assert ir is not None, [str(d) for d in found]
    return ir


def _where(ir: ModelIR) -> dict[str, Block | None]:
    return {x.name: x.block for x in ir.layers}


def test_the_configuration_reader_gives_every_layer_its_block_and_part() -> None:
    ir = _ir("mixtral-8x7b")
    where = _where(ir)
    assert all(b is not None for b in where.values())
    assert where["model.embed_tokens"] == Block(None, Part.EMBEDDING)
    assert where["model.layers.3.input_layernorm"] == Block(3, Part.NORM)
    # Mixtral-8x7B's config.json: num_attention_heads 32, num_key_value_heads 8; a decoder, so its
    # attention is causal (MixtralAttention is_causal = True)
    gqa = Heads(32, 8, causal=True)
    assert where["model.layers.3.self_attn.q_proj"] == Block(3, Part.ATTENTION, gqa)
    assert where["model.layers.3.self_attn.scores"] == Block(3, Part.ATTENTION, gqa)
    assert where["model.layers.3.block_sparse_moe.gate"] == Block(3, Part.ROUTER)
    assert where["model.layers.3.block_sparse_moe.experts.w1"] == Block(3, Part.EXPERT)
    assert where["model.layers.3.block_sparse_moe.combine"] == Block(3, Part.MLP)
    assert where["model.norm"] == Block(None, Part.NORM)
    assert where["lm_head"] == Block(None, Part.HEAD)
    # the 8 experts' w1 as one grouped GEMM (Megatron-Core's GroupedMLP), its weight [8, 14336, 4096]
    grouped = ir.layer("model.layers.3.block_sparse_moe.experts.w1")
    assert grouped.moe is not None
    assert (grouped.moe.expert, grouped.moe.count) == (0, 8)
    assert [p.shape for p in grouped.params] == [(8, 14336, 4096)]
    assert {b.index for b in where.values() if b is not None} == {None, *range(32)}


def test_gpt_blocks_from_the_configuration_reader() -> None:
    gpt = _where(_ir("gpt3-13b"))
    # GPT-3 13B (Brown et al. 2020, table 2.1): 40 heads, no grouped-query attention; its
    # configuration sets no attn_pdrop or resid_pdrop, so GPT2Config's default dropouts of 0.1
    heads = Heads(40, 40, causal=True, dropout=0.1, hidden_dropout=0.1)
    assert gpt["transformer.h.39.attn.c_attn"] == Block(39, Part.ATTENTION, heads)
    assert gpt["transformer.h.39.mlp.c_fc"] == Block(39, Part.MLP)
    assert gpt["transformer.ln_f"] == Block(None, Part.NORM)


def test_an_encoders_attention_is_not_causal(tmp_path: Path) -> None:
    # BERT (bert-base-uncased's config.json): BertSelfAttention masks padding only
    config = {"model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 2}
    config |= {"num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir, _ = llm.extract(path, input_shapes={"input_ids": (1, 128)})
    assert ir is not None
    heads = {x.block.heads for x in ir.layers if x.block is not None and x.block.heads is not None}
    # BertConfig's attention_probs_dropout_prob and hidden_dropout_prob defaults
    assert heads == {Heads(12, 12, causal=False, dropout=0.1, hidden_dropout=0.1)}


def test_onnx_extraction_reads_the_block_from_the_module_path() -> None:
    ir = _ir("gpt2")
    located = [x for x in ir.layers if x.block is not None and x.block.index is not None]
    assert {x.block.index for x in located if x.block is not None} == set(range(12))
    for x in located:
        assert x.block is not None
        assert f".h.{x.block.index}." in f".{x.name}"
        if ".attn" in x.name:
            assert x.block.part is Part.ATTENTION, x.name
    parts = {x.block.part for x in located if x.block is not None}
    assert {Part.ATTENTION, Part.MLP, Part.NORM} <= parts


def test_the_block_survives_the_json_form() -> None:
    ir = _ir("mixtral-8x7b")
    back = document.from_dict(json.loads(document.dumps(ir)))
    assert [x.block for x in back.layers] == [x.block for x in ir.layers]


def test_the_pipeline_cut_reads_the_block_not_the_name() -> None:
    ir = _ir("mixtral-8x7b")
    named = [block_of(x) for x in ir.layers]
    stripped = [block_of(dataclasses.replace(x, block=None)) for x in ir.layers]
    assert len(blocks(named)) == 32
    assert all(k is None for k in stripped)  # the name alone says nothing to the strategy
    assert len(blocks(stripped)) == len(ir.layers)
