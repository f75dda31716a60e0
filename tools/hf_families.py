"""Every model_type transformers ships with a causal-LM, masked-LM, seq2seq, speech or vision
class, built from its default configuration on the meta device and read by modtrans/hf/: how
many give parameters equal to sum(p.numel()) and matrix-product forward FLOPs within 2 % of
FlopCounterMode's count (the issue's acceptance; tests/test_hf.py and tests/test_hf_feeds.py run
a sample in CI).

    python tools/hf_families.py [--sequence 64] [--only llama,opt]   # needs the extra `hf`

Prints one line per family (pass, fail with the ratio, or why it did not build) and the count.

Measured with transformers 5.25.0, torch 2.13.0+cpu, 64 tokens: 303 of the 325 model types pass
(299 before hf/feeds.py's input rules: Kyutai, Voxtral realtime, Granite Speech 5, Gemma 4 unified
assistant; 291 before ImageGPT, XLNet, SEW-D, SigLIP 2, Musicgen, Musicgen Melody, Dia and
Nemotron 3.5 Transcribe; 271 before hf/values.py and hf/inputs.py); every one that built and ran
on meta passes (parameters equal, matrix-product FLOPs within 2 %). The other 22 do not build or
run from their defaults on meta:
- a default configuration transformers itself cannot build (a field None or absent: DBRX,
  DeepSeek-V2, dots1, ESM, HunYuan, Ministral, Nemotron, LFM2-MoE, Moonshine streaming, Qwen4-exp,
  Cohere Compass, Gemma 4 assistant, wav2vec2-BERT and -Conformer; Reformer needs is_decoder, X-MOD
  a language): 18. 16 of them pass from the configuration transformers' own test suite builds
  (tools/hf_tester_configs.py, fixtures/hf/testers, tests/test_hf_testers.py);
- a library that does not load beside torch's CPU wheel: timm (Gemma 3n, TimmWrapper: `import
  timm` imports torchvision, timm/layers/create_norm.py's FrozenBatchNorm2d; PyPI's torchvision
  pinned to torch 2.13.0, 0.28.0, 7.7 MB, is a CUDA build whose _C.so links libtorch_cuda.so and
  libc10_cuda.so, absent from the CPU wheel, so `import torchvision` stops at its meta
  registrations: "operator torchvision::nms does not exist"; the CPU builds are not on PyPI) and
  natten (DiNAT: transformers imports natten.functional's natten2dqkrpb and natten2dav, which
  natten renamed before 0.17.5; 0.21.7 installs without compiling on a machine without CUDA, but
  has neither): 3;
- a shape chosen from values computed from weights: BLT's entropy patching (how many patches
  depends on the entropies its patcher LM computes from the text; patch_size only turns the rule
  on): 1, refused in one line (hf/feeds.refusal). With patch_in_forward false (transformers'
  BltModelTester's configuration) each byte is a patch and BLT passes.
Inputs a model's first input alone does not give come from the code that feeds it (hf/feeds.py):
Kyutai's text token and 32 codebook ids a position, Voxtral realtime's audio_length_per_tok mel
frames a token, a drafter's key/value states, Granite Speech 5's stacked frames (its extractor
needs torchaudio, whose PyPI wheel is a CUDA build too).
A recurrent scan transformers runs as a Python loop without its kernels (a Mamba mixer's selective
scan without mamba_ssm, RecurrentGemma's RG-LRU, RWKV's wkv, xLSTM's and gated delta nets' chunks)
is recorded as one pass over the sequence (hf/scans.py): every recurrent type reads at 8,192
tokens in 3-8 s, within 2x transformers' own meta build of it (bench/bench_hf_read.py).
Vision- and audio-language models also run their towers on one image or one second of audio
(inputs.images, inputs.sounds) where their image or audio path runs on meta.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from modtrans.hf import built, classes, library
from modtrans.ir.document import Kind

GEMMS = (Kind.LINEAR, Kind.MATMUL, Kind.CONV)


def check(config: Any, cls: Any, sequence: int) -> str:
    """pass or FAIL for the model `cls` (None: the class classes.model_class takes) builds from
    `config`: parameters against sum(p.numel()), GEMM FLOPs against FlopCounterMode's."""
    model = library.build(config, cls)
    read = built.read(model, 1, sequence)
    given, ir = read.given, read.ir
    expected = sum(p.numel() for p in model.parameters())
    counted = library.count_forward(model, given)
    ours = sum(x.flops.forward for x in ir.layers if x.kind in GEMMS)
    ratio = ours / counted if counted else float("nan")
    same = ir.totals.params == expected
    close = counted > 0 and abs(ours - counted) <= 0.02 * counted
    verdict = "pass" if same and close else "FAIL"
    return f"{verdict} params {ir.totals.params}/{expected} flops ratio {ratio:.4f}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sequence", type=int, default=64)
    parser.add_argument("--only", default="")
    parser.add_argument("--seconds", type=int, default=120, help="per family")
    args = parser.parse_args()
    found: dict[str, Any] = {}
    for task, _ in classes.TASKS:
        for model_type, name in classes.classes(task).items():
            name = name if isinstance(name, str) else name[0]  # some tables list several classes
            cls = classes.named_class(name)
            if model_type not in found and cls is not None:
                found[model_type] = cls
    only = set(filter(None, args.only.split(",")))
    passed = built = 0
    for model_type, cls in sorted(found.items()):
        if only and model_type not in only:
            continue
        signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("time")))
        signal.alarm(args.seconds)
        try:
            line = check(classes.default_config(model_type), cls, args.sequence)
            built += 1
            passed += line.startswith("pass")
        except Exception as error:  # a family that does not build or run on meta: said, counted
            line = "no-build " + (str(error).strip().splitlines() or [type(error).__name__])[0][:120]
        finally:
            signal.alarm(0)
        print(f"{model_type:32} {cls.__name__:48} {line}", flush=True)
    print(
        f"{passed} of {len(found) if not only else len(only)} families pass ({built} built and ran on meta)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
