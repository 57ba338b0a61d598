"""Exactness against AllenNLP 2.10.1 run live on this CPU, per layer, for each precision mode, on long sentences.

    python bench/exactness.py --threads 1 2 --model small default_charonly --out results/bench/exactness_live_CPU.md
    python bench/exactness.py --threads 1 2 --isa avx2 --out results/bench/exactness_avx2.md

AllenNLP runs in its own venv (.cache/peer_venv, made on first use by bench/peer_allennlp.py's ``ensure_venv``)
on the CPU at hand, in the same run, so both sides' figures come from the same kernels: outputs stored on another
CPU cannot tell our error from the difference between two CPUs' kernels (AllenNLP's own outputs move by a few
1e-5 from one CPU to another on clipped long sentences).

``--isa avx2`` limits every kernel library of both implementations to AVX2 (PyTorch's ATen dispatch, MKL and
oneDNN, through their documented environment variables), which runs the code paths an AVX2-only CPU takes on
a CPU that has AVX-512; the report says which limit was in force and the ATen capability each side used.

``--model`` picks the biLMs: ``small``, a seeded random biLM of the ``small`` preset's architecture (cell and
projection clipping at 3; LSTM weights with gain 1.25, which makes the recurrence amplify rounding, see
bench/presets.py) written in the bilm-tf layout; ``default_charonly``, the shipped trained biLM without token
vectors (AllenNLP's ``_ElmoBiLm`` has no token vectors, so it cannot run the default biLM). Both sides load
the same files and run the same batches from a zero state, AllenNLP's ``_ElmoBiLm`` in its venv, ours
(``load_bilm``) with ``precision`` fp32 (the default) and reference.
The batches hold long sentences (38 to 120 tokens) and a mixed-length batch. The report gives the largest
absolute difference per layer and mode, the sentence length where the largest one is, the CPU model and its
vector flags; compare only figures of one run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import REPO, git_commit, machine, now, write_atomic  # noqa: E402
from corpus import synthetic_corpus  # noqa: E402
from peer_allennlp import BENCH, clean_env, ensure_venv  # noqa: E402
from presets import random_bilm  # noqa: E402
from elmo_features import batch_to_ids, load_bilm, save_bilm  # noqa: E402
from elmo_features.formats.default_model import embedded_models  # noqa: E402
from elmo_features.model.precision import set_precision  # noqa: E402

MODES = ("fp32", "reference")
MODELS = ("small", "default_charonly")
ISA_LIMITS = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                       "ONEDNN_MAX_CPU_ISA": "AVX2"}}


def limit_isa(isa: str) -> None:
    """Re-run this script with the kernel libraries limited to ``isa`` (the variables must be set before torch loads)."""
    if isa == "native" or all(os.environ.get(k) == v for k, v in ISA_LIMITS[isa].items()):
        return
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **ISA_LIMITS[isa]})


def peer_capability(venv: Path) -> str:
    """The ATen CPU capability the AllenNLP venv's torch dispatches to under the current environment."""
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", code], env=clean_env(), capture_output=True,
                          text=True)
    return proc.stdout.strip() or f"unknown ({proc.stderr.strip().splitlines()[-1:]})"


def batches_of_long_sentences(seed: int = 7) -> list[list[list[str]]]:
    """Sentences of 38, 60 and 120 tokens (one batch each, two sentences) and one batch of mixed lengths."""
    words = [w for s in synthetic_corpus(4000, seed=seed) for w in s]
    rng = np.random.default_rng(seed)

    def sentence(n: int) -> list[str]:
        start = int(rng.integers(0, len(words) - n))
        return words[start:start + n]

    out = [[sentence(n), sentence(n)] for n in (38, 60, 120)]
    out.append([sentence(n) for n in (120, 3, 57, 38, 1, 90, 14, 38)])
    return out


def model_files(model: str, work: Path) -> tuple[Path, Path]:
    """(options.json, weights.hdf5) of ``model``: the random ``small`` biLM written into ``work``, or a shipped one."""
    if model != "small":
        return embedded_models()[model] / "options.json", embedded_models()[model] / "weights.hdf5"
    opts, weights = work / "options.json", work / "weights.hdf5"
    save_bilm(random_bilm("small", stateful=False), opts, weights)
    return opts, weights


def run(model: str, threads: int, venv: Path, work: Path) -> dict:
    torch.set_num_threads(threads)
    work.mkdir(parents=True, exist_ok=True)
    opts, weights = model_files(model, work)
    bilm = load_bilm(opts, weights)  # both sides read the same files
    batches = batches_of_long_sentences()
    diffs: dict[str, list[list[float]]] = {m: [] for m in MODES}
    worst = {m: (0.0, 0) for m in MODES}  # (largest difference, length of its sentence)
    for i, batch in enumerate(batches):  # one worker call per batch: AllenNLP from a zero state every time
        (work / "batch.json").write_text(json.dumps([batch]))
        prefix = str(work / f"allennlp_{i}")
        proc = subprocess.run([str(venv / "bin" / "python"), str(BENCH / "peer_worker.py"), str(opts), str(weights),
                               str(work / "batch.json"), prefix, "--threads", str(threads), "--compare", "1"],
                              env=clean_env(), capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"AllenNLP worker failed:\n{proc.stderr[-3000:]}")
        theirs = np.load(prefix + ".npz")["arr_0"]  # (L, B, T, D)
        ids = batch_to_ids(batch)
        for mode in MODES:
            set_precision(bilm, mode)
            with torch.inference_mode():
                ours = bilm(ids).layers.numpy()  # (L, B, T, D)
            d = np.abs(ours - theirs)  # (L, B, T, D)
            diffs[mode].append([float(d[k].max()) for k in range(ours.shape[0])])
            per_sentence = d.max(axis=(0, 2, 3))  # (B,)
            b = int(per_sentence.argmax())
            if per_sentence[b] > worst[mode][0]:
                worst[mode] = (float(per_sentence[b]), len(batch[b]))
    return {"model": model, "threads": threads, "batches": [[len(s) for s in b] for b in batches],
            "max_abs_diff": {m: [max(d[k] for d in v) for k in range(len(v[0]))] for m, v in diffs.items()},
            "worst_sentence_tokens": {m: w[1] for m, w in worst.items()}, "per_batch": diffs}


def isa_line(isa: str, venv: Path) -> str:
    ours = torch.backends.cpu.get_cpu_capability()
    limit = ("none (what the CPU offers)" if isa == "native" else
             "limited to " + isa.upper() + " by " + ", ".join(f"{k}={v}" for k, v in ISA_LIMITS[isa].items()))
    return f"{limit}; ATen capability: ours {ours}, AllenNLP's {peer_capability(venv)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--venv", type=Path, default=REPO / ".cache" / "peer_venv")
    ap.add_argument("--isa", choices=["native", *ISA_LIMITS], default="native",
                    help="limit both implementations' kernels to this instruction set (default: what the CPU has)")
    ap.add_argument("--model", nargs="+", choices=MODELS, default=["small"],
                    help="biLMs to compare: small (random weights) and/or default_charonly (the shipped trained char-only biLM)")
    ap.add_argument("--out", type=Path, help="Markdown report (and .json beside it)")
    args = ap.parse_args()
    limit_isa(args.isa)
    venv = ensure_venv(args.venv).parent.parent
    results = [run(model, t, venv, REPO / ".cache" / "exactness" / model) for model in args.model for t in args.threads]
    m = machine()
    lines = ["# Exactness against AllenNLP 2.10.1, run live on this CPU (long sentences)", "",
             f"Written by `python bench/exactness.py {' '.join(sys.argv[1:])}` on {now()}, commit `{git_commit()}`.",
             "", f"* CPU: {m['cpu_model']}; flags: {m['cpu_flags']}; {m['cpu_cores']} cores; torch {torch.__version__}",
             f"* kernels: {isa_line(args.isa, venv)}",
             f"* batches (sentence lengths): {results[0]['batches']}", "",
             "* models: small = random weights of the `small` preset (cell and projection clip 3, LSTM gain 1.25); "
             "default_charonly = the shipped trained biLM without token vectors (same clips)", "",
             "Largest absolute difference from AllenNLP's `_ElmoBiLm` over all batches, per layer, and the length of "
             "the sentence holding the largest:", "",
             "| model | threads | precision | layer 0 | layer 1 | layer 2 | largest | in a sentence of |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for mode, d in r["max_abs_diff"].items():
            lines.append(f"| {r['model']} | {r['threads']} | {mode} | " + " | ".join(f"{x:.2e}" for x in d)
                         + f" | {max(d):.2e} | " + (f"{r['worst_sentence_tokens'][mode]} tokens |" if max(d) > 0 else "- |"))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        write_atomic(args.out, text)
        write_atomic(args.out.with_suffix(".json"), json.dumps({"machine": m, "commit": git_commit(), "isa": args.isa,
                                                                 "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
