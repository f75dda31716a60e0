"""Published config.json files (fixtures/hf/MANIFEST.md: each a verbatim copy, its repository
and commit) of families outside the hand-written list, read by the generic path as they are:
old field names (BLOOM's n_head, n_layer), a remote-code class name and auto_map on a model_type
transformers defines (MPT-7B, Florence-2), `architectures` listing a headless base first
(bart-large) or a fine-tuned head (DeBERTa-v3 for question answering), none at all (LayoutLMv3),
`torch_dtype` float16 and bfloat16. Each against transformers itself: parameters equal
sum(p.numel()), the matrix products' forward FLOPs within 2 % of FlopCounterMode's count, the IR's
dtype the checkpoint's.

Marker hf: needs torch and transformers (the extra `hf`); the large or slow-to-import ones slow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from typer.testing import CliRunner

from modtrans import pipeline
from modtrans.cli import app
from modtrans.hf import built, classes, configs, library
from modtrans.llm.config import BERT_HEADS, DTYPES, undescribed
from tests.hfcheck import GEMMS, agrees

pytestmark = pytest.mark.hf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"
ROOT_CONFIGS = FIXTURES.parent / "configs"  # the hand-written families' published files' keys

REAL = {
    # file: (the class transformers builds for the checkpoint, the M805 warnings it gives)
    "mpt-7b-instruct": ("MptForCausalLM", 1),  # names MPTForCausalLM (its own code's); auto_map
    "bart-large": ("BartForConditionalGeneration", 0),  # lists BartModel first
    "deberta-v3-base-squad": ("DebertaV2ForQuestionAnswering", 0),  # a fine-tuned head
    "layoutlmv3-base": ("LayoutLMv3Model", 0),  # no architectures; no LM class: the base
    "opt-1.3b": ("OPTForCausalLM", 0),
    "bloom-3b-finetune": ("BloomForCausalLM", 0),
    "vit-base-patch16-224": ("ViTForImageClassification", 0),
    "dinov2-small": ("Dinov2Model", 0),
    "nllb-200-distilled-600M": ("M2M100ForConditionalGeneration", 0),
    "opus-mt-en-zh": ("MarianMTModel", 0),
    "mbart-large-50-many-to-many-mmt": ("MBartForConditionalGeneration", 0),
    "whisper-large-v3-turbo": ("WhisperForConditionalGeneration", 0),
    "paligemma-3b-pt-224": ("PaliGemmaForConditionalGeneration", 0),
    "florence-2-large": ("Florence2ForConditionalGeneration", 1),  # auto_map; transformers has it
    "gpt-neo-125m": ("GPTNeoForCausalLM", 0),  # num_layers, num_heads, attention_types
    "distilbert-base-uncased-38-labels": ("DistilBertForMaskedLM", 0),  # dim, n_heads, n_layers
    "albert-base-v2-classifier": ("AlbertForSequenceClassification", 0),  # a fine-tuned head
    "electra-small-discriminator": ("ElectraForPreTraining", 0),  # the discriminator's head
    "roberta-base-squad2": ("RobertaForQuestionAnswering", 0),
    "blenderbot-400M-distill": ("BlenderbotForConditionalGeneration", 0),
    "gpt-oss-20b-echocog": ("GptOssForCausalLM", 1),  # 32 experts, top 4; quantization_config (gptq)
    "esm2_t33_650M_UR50D": ("EsmForMaskedLM", 0),  # a default configuration transformers cannot build
    "gpt-j-6b": ("GPTJForCausalLM", 0),  # n_embd, n_head, n_layer, rotary_dim; no torch_dtype
    "hunyuan-mt-7b-nanoquant": ("HunYuanDenseV1ForCausalLM", 0),  # rope_scaling "dynamic" with alpha
    "clip-vit-large-patch14": ("CLIPModel", 0),  # two towers; text_config_dict beside text_config
    "clip-vit-large-patch14-text": ("CLIPTextModel", 0),  # a diffusion pipeline's text encoder
    "dpr-ctx-encoder-finetune": ("DPRContextEncoder", 0),
    "blip-image-captioning-base": ("BlipForConditionalGeneration", 0),  # an image and a caption
    "bge-reranker-v2-m3": ("XLMRobertaForSequenceClassification", 0),  # 8,194 positions, 250,002 tokens
    "sdxl-clip-text-encoder-2": ("CLIPTextModelWithProjection", 0),
    "stable-cascade-clip-text-encoder": ("CLIPTextModelWithProjection", 0),
    "bart-large-mnli": ("BartForSequenceClassification", 0),  # pools at each example's </s>
    "yolos-tiny": ("YolosForObjectDetection", 0),  # an 800 x 1333 image, 100 detection tokens
    "electra-small-generator": ("ElectraForMaskedLM", 0),  # the generator's head
    "whisper-base": ("WhisperForConditionalGeneration", 0),
    # as transformers 5.5.4 saves them (`dtype`, sub-configurations' own):
    "all-mpnet-base-v2-tf5": ("MPNetModel", 0),
    "blip-image-captioning-large-tf5": ("BlipForConditionalGeneration", 0),
    "clip-vit-large-patch14-tf5": ("CLIPModel", 0),
    "distilbert-sentiment-tf5": ("DistilBertForSequenceClassification", 0),
    "wavlm-base-plus-tf5": ("WavLMModel", 0),  # a speech encoder: its convolutions before its blocks
    "whisper-large-v3-tf5": ("WhisperForConditionalGeneration", 0),
    "bge-m3-tf5": ("XLMRobertaModel", 0),  # transformers 5.9.0's
    "clip-vit-base-patch32": ("CLIPModel", 0),  # transformers 4.57.0's
}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test reads its own IR cache: an IR an earlier build of the code kept is not read back."""
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))


QUICK = {"bart-large", "layoutlmv3-base"}
"""The class choices CI's hf stage reads (-m "hf and not slow"; MPT-7B's auto_map and dtype in
the test of its own below); `-m hf` reads all."""


IMAGE_TOKENS = {"paligemma-3b-pt-224": 256}
"""The image tokens a file's sequence holds before its 64 of text (PaliGemma: SigLIP at 224 px,
patch 14, its vision_config's num_image_tokens): a shorter sequence is refused (X501)."""


@pytest.mark.parametrize("name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in REAL])
def test_a_published_configuration_is_built_as_transformers_builds_it(name: str) -> None:
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    config = classes.config_of(data)
    model = library.build(config)
    assert type(model).__name__ == REAL[name][0]
    read = built.read(model, 1, 64 + IMAGE_TOKENS.get(name, 0))
    given, ir = read.given, read.ir
    agrees(model, given, ir)
    declared = str(data.get("torch_dtype") or data.get("dtype") or "float32")
    assert {p.dtype for x in ir.layers for p in x.params} == {DTYPES[declared][0]}
    native = classes.known(data["model_type"])
    fields = classes.unread(data) if configs.foreign(data, native, False) else []
    said = configs.warnings(data, name, native=native, remote=False, fields=fields)
    assert [d.code for d in said] == ["M805"] * REAL[name][1]


HAND_WRITTEN = {
    # file: the class transformers builds from it
    "llama-2-7b-hf": "LlamaForCausalLM",  # saved by 4.31.0: pretraining_tp, rope_scaling null
    "tinyllama-1.1b-chat-v1.0": "LlamaForCausalLM",  # saved by 4.56.0: dtype, head_dim
    "xgen-7b-8k-base": "LlamaForCausalLM",  # a 51,200-token vocabulary, no num_key_value_heads
    "qwen2.5-0.5b-instruct": "Qwen2ForCausalLM",  # tied head, sliding_window unused
    "phi-2-auto-map": "PhiForCausalLM",  # model_type phi beside auto_map (its own code's): M805
    "all-minilm-l6-v2": "BertModel",  # sentence-transformers' MiniLM, saved by 4.15.0
    "codet5-small": "T5ForConditionalGeneration",  # relu, tie_word_embeddings absent
    "flan-t5-base": "T5ForConditionalGeneration",  # gated-gelu, untied head
    "t5-v1_1-xxl": "T5ForConditionalGeneration",  # gated-gelu, untied head, 11 B
    "llama-3.2-1b-instruct": "LlamaForCausalLM",  # rope_scaling llama3, three eos ids, tied head
    "llama-3.2-1b-pruned": "LlamaForCausalLM",  # a pruner's output: 15 layers, 8,028-wide MLP
    "deepseek-r1-distill-llama-8b": "LlamaForCausalLM",  # Llama 3.1 8B's shape, rope_scaling llama3
    "ms-marco-minilm-l-6-v2": "BertForSequenceClassification",  # pooler and a one-label classifier
    "distilgpt2": "GPT2LMHeadModel",  # n_layer 6, n_ctx, _num_labels
    "gte-base": "BertModel",  # float16
}
"""Published files of hand-written families (llm/config.py): read without torch, each against
the class transformers builds from the same file."""


HAND_WRITTEN_SAMPLE = {"qwen2.5-0.5b-instruct"}


@pytest.mark.parametrize(
    "name", [n if n in HAND_WRITTEN_SAMPLE else pytest.param(n, marks=pytest.mark.slow) for n in HAND_WRITTEN]
)
def test_a_published_configuration_of_a_hand_written_family_is_transformers_model(name: str) -> None:
    """The hand-written path's IR (what `modtrans translate` reads without the extra) against
    transformers' build of the same file: parameters sum(p.numel()), forward GEMM FLOPs within
    2 % of FlopCounterMode's, the weights' dtype the file's. T5 where the file unties its head
    (tie_word_embeddings false: flan-t5, T5 v1.1): the checkpoint's lm_head of vocab x d_model
    beside its shared embedding, which transformers 5 ties always (configuration_t5.py,
    T5Config.__post_init__: "we tie weights always and force it to be `True`"; tests/test_t5.py)."""
    path = FIXTURES / f"{name}.json"
    data = json.loads(path.read_text())
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 64)})
    assert ir is not None, found
    assert [d.code for d in found] == (["M805"] if "auto_map" in data else [])
    model = library.build(classes.config_of(data))
    assert type(model).__name__ == HAND_WRITTEN[name]
    t5_untied = data["model_type"] == "t5" and data.get("tie_word_embeddings") is False
    untied = data["vocab_size"] * data["d_model"] if t5_untied else 0
    assert ir.totals.params == sum(p.numel() for p in model.parameters()) + untied
    counted = library.count_forward(model, library.inputs(model, 1, 64))
    ours = sum(x.flops.forward for x in ir.layers if x.kind in GEMMS)
    assert abs(ours - counted) <= 0.02 * counted, (ours, counted)
    declared = str(data.get("torch_dtype") or data.get("dtype") or "float32")
    assert {p.dtype for x in ir.layers for p in x.params} == {DTYPES[declared][0]}


def test_a_class_the_hand_written_family_does_not_describe_is_transformers_own() -> None:
    """FLUX.1-schnell's text encoder: a t5 configuration naming T5EncoderModel (the encoder alone,
    bitsandbytes-quantized). The hand-written t5 family describes T5's encoder-decoder (11.1 B
    parameters from this file); with the extra transformers builds the class the file names:
    4,762,310,656 parameters (24 blocks of 4096-wide attention and a 10240-wide gated MLP over a
    32128-token embedding), the quantization said (M805)."""
    path = FIXTURES / "flux-t5-text-encoder.json"
    data = json.loads(path.read_text())
    assert undescribed(data) == "T5EncoderModel"
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 64)})
    assert ir is not None
    model = library.build(classes.config_of(data))
    assert type(model).__name__ == "T5EncoderModel"
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
    d, ff, layers = data["d_model"], data["d_ff"], data["num_layers"]
    block = 4 * d * d + 3 * d * ff + 2 * d  # q, k, v, o; wi_0, wi_1, wo; two norms
    buckets = data["relative_attention_num_buckets"] * data["num_heads"]  # the first block's
    assert ir.totals.params == data["vocab_size"] * d + layers * block + buckets + d
    assert [x.code for x in found] == ["M805"]
    assert "bitsandbytes" in found[0].message


@pytest.mark.slow
def test_qwen2_5_vl_3b_s_published_file_is_transformers_model() -> None:
    """Qwen/Qwen2.5-VL-3B-Instruct's config.json as published (its keys unsorted, no final newline;
    rope_scaling mrope, a tied head where the 7B's is untied, a vision tower of 32 blocks with
    windowed attention), read by the hand-written path on one 448 x 448 image: 3,754,622,976
    parameters, Qwen2_5_VLForConditionalGeneration's."""
    path = FIXTURES / "qwen2.5-vl-3b-instruct.json"
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 1024)})
    assert ir is not None, found
    model = library.build(classes.config_of(json.loads(path.read_text())))
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert ir.totals.params == sum(p.numel() for p in model.parameters()) == 3_754_622_976


def test_trust_remote_code_runs_the_code_a_hand_written_family_s_file_names() -> None:
    """Phi-2's published file beside model_type phi names its own code (auto_map): with
    --trust-remote-code that code is what builds the model, as transformers' trust_remote_code
    builds it, so a folder without its configuration_phi.py is refused in one line (the
    hand-written phi family, read without the option, is not what the option asks for)."""
    ir, found = pipeline.extract_checked(FIXTURES / "phi-2-auto-map.json", trust_remote_code=True)
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert "configuration_phi.py" in found[0].message
    assert "\n" not in found[0].message


def test_a_speech_encoder_s_blocks_are_its_transformer_layers(tmp_path: Path) -> None:
    """WavLM-base-plus: 12 transformer layers after a 7-convolution feature extractor (its
    WavLMGroupNormConvLayer and WavLMNoLayerNormConvLayer, a ModuleList too). The pipeline cuts
    the 12 (config.num_hidden_layers), the convolutions run before them as an embedding does;
    they were 19 blocks, which 2 stages could not divide (X501)."""
    data = json.loads((FIXTURES / "wavlm-base-plus-tf5.json").read_text())
    ir, _ = pipeline.extract_checked(FIXTURES / "wavlm-base-plus-tf5.json")
    assert ir is not None
    blocks = {x.block.index for x in ir.layers if x.block is not None and x.block.index is not None}
    assert blocks == set(range(data["num_hidden_layers"]))
    convolutions = [x for x in ir.layers if ".conv_layers." in x.name]
    numbered = {x.name.split(".conv_layers.")[1].split(".")[0] for x in convolutions}
    assert len(numbered) == len(data["conv_dim"])
    assert all(x.block is not None and x.block.index is None for x in convolutions)
    runner = CliRunner()
    (tmp_path / "et").mkdir()
    args = ["translate", str(FIXTURES / "wavlm-base-plus-tf5.json"), "--pp", "2", "--npus", "2"]
    result = runner.invoke(app, [*args, "--format", "chakra-et", "-o", str(tmp_path / "et" / "w")])
    assert result.exit_code == 0, result.output


def test_fields_transformers_own_class_does_not_define_are_named() -> None:
    """Florence-2-large's file (auto_map: its own code) sizes its DaViT vision tower by
    `dim_embed`; transformers' Florence2VisionConfig takes `embed_dim` and keeps its defaults
    (128 to 1,024 channels where the file says 256 to 2,048): the warning names the field, first
    among the 13 no class here reads. MPT-7B's three (init_config, tokenizer_name, verbose) only
    initialise or name a tokenizer."""
    florence = json.loads((FIXTURES / "florence-2-large.json").read_text())
    fields = classes.unread(florence)
    assert fields[0] == "vision_config.dim_embed"
    assert len(fields) == 13
    said = configs.warnings(florence, "florence", native=True, remote=False, fields=fields)
    assert "vision_config.dim_embed, vision_config.visual_temporal_embedding" in said[0].message
    assert "(13 in all)" in said[0].message
    mpt = json.loads((FIXTURES / "mpt-7b-instruct.json").read_text())
    assert classes.unread(mpt) == ["init_config", "tokenizer_name", "verbose"]


def test_mpt_7b_s_own_code_is_named_and_transformers_class_built(tmp_path: Path) -> None:
    """MPT-7B-Instruct's file names its remote code (auto_map) for a model_type transformers
    defines: without --trust-remote-code transformers' MptForCausalLM is built, as from_pretrained
    builds it, and one warning says so; its weights are bfloat16 (torch_dtype), as the IR's."""
    runner = CliRunner()
    out = tmp_path / "mpt"
    args = ["translate", str(FIXTURES / "mpt-7b-instruct.json"), "--seq-len", "64", "--format", "chakra-et"]
    result = runner.invoke(app, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.output.splitlines() if "warning M805" in line]
    assert len(warned) == 1
    assert "configuration_mpt, modeling_mpt" in warned[0]
    assert "'mpt'" in warned[0]
    assert warned[0].endswith("init_config, tokenizer_name, verbose")
    shapes = {"input_ids": (1, 64)}
    ir, found = pipeline.extract_checked(FIXTURES / "mpt-7b-instruct.json", input_shapes=shapes)
    assert ir is not None
    assert [d.code for d in found] == ["M805"]
    # MPT-7B: 6.7 B parameters (the model card's 6.7B); d_model 4096, 32 layers, 50432 tokens,
    # no biases, tied head: 50432 x 4096 + 32 x (12 x 4096^2 + 2 x 4096) + 4096
    assert ir.totals.params == 50432 * 4096 + 32 * (12 * 4096**2 + 2 * 4096) + 4096
    assert {p.dtype for x in ir.layers for p in x.params} == {"bfloat16"}


def test_a_quantization_config_is_built_unquantized_and_said() -> None:
    """gpt-oss-20b's quantization_config (mxfp4, as its published file and every copy of it
    quote it): one warning, naming the method and what a quantized checkpoint trains as."""
    quantized = {
        "model_type": "gpt_oss",
        "quantization_config": {
            "modules_to_not_convert": [
                "model.layers.*.self_attn",
                "model.layers.*.mlp.router",
                "model.embed_tokens",
                "lm_head",
            ],
            "quant_method": "mxfp4",
        },
    }
    said = configs.warnings(quantized, "config.json", native=True, remote=False)
    assert [d.code for d in said] == ["M805"]
    assert "quantization_config (mxfp4): built unquantized" in said[0].message
    assert configs.warnings({"model_type": "gpt_oss"}, "config.json", native=True, remote=False) == []


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("minicpm-v-2_6", "--trust-remote-code"),  # model_type minicpmv: only its own code defines it
        ("mms-tts-eng", "values of a tensor computed from its weights"),  # VITS sizes its output by them
        ("bunny-phi-2-siglip-lora", "--trust-remote-code"),  # model_type bunny-phi: its own code's
        # no model_type, as microsoft/layoutlm-base-uncased was published: transformers 5 refuses
        # it too (AutoConfig.from_pretrained: "Should have a `model_type` key")
        ("layoutlm-base-uncased", 'add "model_type": "layoutlm"'),
        ("detr-resnet-50", "timm"),  # its ResNet-50 backbone is timm's, not installed with the extra
    ],
)
def test_a_published_configuration_that_cannot_be_built_is_refused_in_one_line(name: str, said: str) -> None:
    shapes = {"input_ids": (1, 64)}
    ir, found = pipeline.extract_checked(FIXTURES / f"{name}.json", input_shapes=shapes)
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert said in found[0].message
    assert "\n" not in found[0].message


PUBLISHED = sorted(p.stem for p in FIXTURES.glob("*.json"))
"""Every configuration file in fixtures/hf (MANIFEST.md: each one's provenance)."""
CLI_SAMPLE = {"clip-vit-large-patch14-text", "qwen2.5-0.5b-instruct"}


@pytest.mark.parametrize(
    "name", [n if n in CLI_SAMPLE else pytest.param(n, marks=pytest.mark.slow) for n in PUBLISHED]
)
def test_a_published_configuration_translates_or_is_refused_in_one_line(name: str, tmp_path: Path) -> None:
    """Each file through the CLI as a user gives it (default options), then under tensor and
    sequence parallelism, pipeline stages and experts over data ranks, to text and to traces: a
    workload, or one diagnostic line and exit 1 or 2, never a traceback."""
    (tmp_path / "et").mkdir()
    given = ["--npus", "4", "--seq-len", "64"]
    layouts = (
        ["-o", str(tmp_path / "d.txt")],
        [*given, "--tp", "2", "--dp", "2", "--sp", "-o", str(tmp_path / "a.txt")],
        [*given, "--pp", "2", "--dp", "2", "--format", "chakra-et", "-o", str(tmp_path / "et" / "p")],
        [*given, "--dp", "4", "--ep", "2", "--format", "chakra-et", "-o", str(tmp_path / "et" / "q")],
    )
    runner = CliRunner()
    for layout in layouts:
        result = runner.invoke(app, ["translate", str(FIXTURES / f"{name}.json"), *layout])
        raised = result.exception
        assert raised is None or isinstance(raised, SystemExit), (layout, raised)
        if result.exit_code:
            assert result.exit_code in (1, 2)
            errors = [x for x in result.output.splitlines() if " error " in x or x.startswith("modtrans:")]
            assert len(errors) == 1, result.output


@pytest.mark.parametrize("architecture", sorted(BERT_HEADS))
def test_each_bert_class_s_heads_are_transformers(architecture: str, tmp_path: Path) -> None:
    """The published cross-encoder's file (cross-encoder/ms-marco-MiniLM-L-6-v2: a
    BertForSequenceClassification of one label) naming each BERT class transformers defines: the
    hand-written path puts that class's heads on the encoder (config.BERT_HEADS: pooler,
    classifier, qa_outputs ...), parameter for parameter the class transformers builds from it."""
    data = json.loads((FIXTURES / "ms-marco-minilm-l-6-v2.json").read_text())
    data["architectures"] = [architecture]
    (tmp_path / "config.json").write_text(json.dumps(data))
    ir, _ = pipeline.extract_checked(tmp_path / "config.json", input_shapes={"input_ids": (1, 64)})
    assert ir is not None
    model = library.build(classes.config_of(data))
    assert type(model).__name__ == architecture
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
    theirs = {n.removeprefix("bert."): tuple(p.shape) for n, p in model.named_parameters()}
    ours = {p.name: p.shape for x in ir.layers for p in x.params}
    heads = {n for n in theirs if n.startswith(("pooler.", "classifier.", "qa_outputs.", "cls.seq"))}
    assert {n: ours.get(n) for n in heads} == {n: theirs[n] for n in heads}


BIASED = ("gemma-2b", "gemma-2-9b", "gemma-3-1b-pt", "olmo-2-1124-7b", "phi-3-mini-4k-instruct", "phi-2")
"""Hand-written families whose attention reads attention_bias, or (Phi-3's) reads none
(fixtures/configs: their published files' keys)."""


@pytest.mark.parametrize(
    "name",
    [
        n if n in ("gemma-3-1b-pt", "phi-3-mini-4k-instruct") else pytest.param(n, marks=pytest.mark.slow)
        for n in BIASED
    ],
)
def test_attention_bias_puts_biases_where_transformers_puts_them(name: str, tmp_path: Path) -> None:
    """A file of each family with "attention_bias": true: the biases its transformers class builds
    from it (GemmaAttention's, Olmo2Attention's q, k, v and o; Phi3Attention's none, its
    projections bias=False), none on the MLP (GemmaMLP's, Olmo2MLP's, Phi3MLP's bias=False), where
    the hand-written path put them on the MLP too (Gemma-2-9B: 1,354,752 parameters over)."""
    data = json.loads((ROOT_CONFIGS / f"{name}.json").read_text())
    data["attention_bias"] = True
    (tmp_path / "config.json").write_text(json.dumps(data))
    ir, _ = pipeline.extract_checked(tmp_path / "config.json", input_shapes={"input_ids": (1, 32)})
    assert ir is not None
    model = library.build(classes.config_of(data))
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
