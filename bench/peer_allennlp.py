"""Peer benchmark: AllenNLP 2.10.1's ``_ElmoBiLm`` vs elmo_features' BiLM on the same weights and batches.

    python bench/peer_allennlp.py --preset small original --threads 2 --json out.json

AllenNLP runs in its own venv (default .cache/peer_venv, created on first use): torch==2.13.0 (the
wheel pip finds locally), ``allennlp==2.10.1 --no-deps`` and the few packages its import chain needs;
stand-ins for transformers, spacy, fairscale, torchvision, huggingface_hub and a local-only
cached_path come from bench/peer_stubs (put on that venv's path only, by peer_worker.py).

Per preset: random weights are written with ``save_bilm`` (bilm-tf layout) and loaded by both; both
run the same batches of the synthetic corpus, stateful (AllenNLP's ``_ElmoBiLm`` always is), with
char ids computed outside the timer; the layers of the first batches are compared.
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

from common import REPO, machine, make_batches, time_batches, write_atomic, write_json  # noqa: E402
from corpus import describe, synthetic_corpus  # noqa: E402
from presets import random_bilm  # noqa: E402
from elmo_features import batch_to_ids, save_bilm  # noqa: E402
from elmo_features.model.precision import PrecisionError, check_precision, set_precision  # noqa: E402

DEFAULT_SENTENCES = {"small": 2048, "medium": 1536, "original": 1024}
VENV_PACKAGES = ["tqdm", "more-itertools", "base58", "dill", "lmdb", "h5py", "numpy", "termcolor", "filelock",
                 "requests"]
BENCH = Path(__file__).resolve().parent


def ensure_venv(venv: Path) -> Path:
    """The venv's python, creating and filling the venv first if it is missing or incomplete."""
    py = venv / "bin" / "python"
    marker = venv / ".elmo_tasks_peer_ready"
    if marker.exists():
        return py
    print(f"creating the AllenNLP venv at {venv} (once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run(pip + ["torch==2.13.0"], check=True)
    subprocess.run(pip + ["--no-deps", "allennlp==2.10.1"], check=True)
    subprocess.run(pip + VENV_PACKAGES, check=True)
    check = subprocess.run([str(py), str(BENCH / "peer_worker.py"), "--help"], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"the AllenNLP venv at {venv} cannot import _ElmoBiLm:\n{check.stderr[-2000:]}")
    marker.write_text("ok\n")
    return py


def clean_env() -> dict:
    """The environment for the venv's python: no PYTHONPATH/PYTHONHOME from ours, offline hubs."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    return env


def run_preset(name: str, n_sentences: int, batch_size: int, order: str, threads: int, py: Path,
               work: Path, compare: int, bf16: bool = False) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(threads)
    bilm = random_bilm(name, stateful=True)
    opts, weights = work / f"{name}_options.json", work / f"{name}_weights.hdf5"
    save_bilm(bilm, opts, weights)
    corpus = synthetic_corpus(n_sentences)
    batches = make_batches(corpus, batch_size, order)
    write_atomic(work / f"{name}_batches.json", json.dumps(batches))
    n_tokens = sum(len(s) for s in corpus)
    prefix = str(work / f"{name}_allennlp")
    proc = subprocess.run([str(py), str(BENCH / "peer_worker.py"), str(opts), str(weights),
                           str(work / f"{name}_batches.json"), prefix, "--threads", str(threads),
                           "--compare", str(compare)], env=clean_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"AllenNLP worker failed for {name}:\n{proc.stderr[-3000:]}")
    peer = json.loads(Path(prefix + ".json").read_text())
    ids = [batch_to_ids(b) for b in batches]
    ids_same = bool(np.array_equal(np.load(prefix + "_ids0.npy"), ids[0].numpy()))

    def ours(x):
        with torch.inference_mode():
            return bilm(x).layers

    bilm.reset_states()
    first = [ours(x).numpy() for x in ids[:compare]]  # from a zero state, as AllenNLP's run
    theirs = np.load(prefix + ".npz")
    diffs = [float(np.abs(first[i] - theirs[f"arr_{i}"]).max()) for i in range(len(first))]
    bilm.reset_states()
    t = time_batches(ours, ids, n_tokens)
    extra = {}
    if bf16:  # ours again with precision bf16 (opt-in), same batches, same run
        set_precision(bilm, "bf16")
        bilm.reset_states()
        first16 = [ours(x).numpy() for x in ids[:compare]]
        rel = [float(np.abs(first16[i] - theirs[f"arr_{i}"]).max() / np.abs(theirs[f"arr_{i}"]).max())
               for i in range(len(first16))]
        bilm.reset_states()
        t16 = time_batches(ours, ids, n_tokens)
        extra = {"ours_bf16_tokens_per_s": t16["tokens_per_s"],
                 "speedup_bf16_vs_allennlp": t16["tokens_per_s"] / peer["tokens_per_s"],
                 "bf16_max_rel_diff_per_batch": rel}
    return {**extra, "preset": name, "corpus": describe(corpus), "batch_size": batch_size, "batches": len(batches),
            "order": order, "threads": threads, "ours_tokens_per_s": t["tokens_per_s"],
            "allennlp_tokens_per_s": peer["tokens_per_s"], "speedup_vs_allennlp": t["tokens_per_s"] / peer["tokens_per_s"],
            "max_abs_diff_per_batch": diffs, "char_ids_identical": ids_same, "allennlp_version": peer["allennlp"],
            "allennlp_torch": peer["torch"]}


def report(r: dict) -> str:
    return (f"[{r['preset']}] {r['corpus']['tokens']} tokens in {r['batches']} batches of {r['batch_size']} "
            f"({r['order']} order), {r['threads']} threads, stateful\n"
            f"  AllenNLP {r['allennlp_version']} _ElmoBiLm: {r['allennlp_tokens_per_s']:.1f} tokens/s; "
            f"ours: {r['ours_tokens_per_s']:.1f} tokens/s -> {r['speedup_vs_allennlp']:.2f}x\n"
            f"  same char ids: {r['char_ids_identical']}; max abs diff of all layers, batch by batch: "
            + ", ".join(f"{d:.2e}" for d in r["max_abs_diff_per_batch"])
            + (f"\n  ours with --precision bf16: {r['ours_bf16_tokens_per_s']:.1f} tokens/s -> "
               f"{r['speedup_bf16_vs_allennlp']:.2f}x AllenNLP (fp32); max |diff| / max |AllenNLP| per batch: "
               + ", ".join(f"{d:.1e}" for d in r["bf16_max_rel_diff_per_batch"]) if "ours_bf16_tokens_per_s" in r else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", nargs="+", default=["small", "original"], choices=sorted(DEFAULT_SENTENCES))
    ap.add_argument("--sentences", type=int, default=None, help="corpus size (default: per preset)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--order", choices=["corpus", "sorted"], default="corpus")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compare", type=int, default=2, help="batches whose layers are compared")
    ap.add_argument("--venv", type=Path, default=REPO / ".cache" / "peer_venv")
    ap.add_argument("--work", type=Path, default=REPO / ".cache" / "peer_bench", help="weights, batches, outputs")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--bf16", action="store_true", help="also time ours with precision bf16 (CPUs with AVX512-BF16/AMX)")
    ap.add_argument("--setup-only", action="store_true", help="create the AllenNLP venv if needed, then stop")
    args = ap.parse_args(argv)
    if args.bf16:
        try:
            check_precision("bf16")
        except PrecisionError as e:
            print(f"error: --bf16: {e}", file=sys.stderr)
            return 2
    py = ensure_venv(args.venv)
    if args.setup_only:
        print(f"AllenNLP venv ready: {py}")
        return 0
    results = []
    for name in args.preset:
        r = run_preset(name, args.sentences or DEFAULT_SENTENCES[name], args.batch_size, args.order,
                       args.threads, py, args.work, args.compare, args.bf16)
        print(report(r), flush=True)
        results.append(r)
    if args.json:
        write_json(args.json, {"machine": machine(), "results": results,
                               "command": "python " + " ".join([sys.argv[0]] + (argv or sys.argv[1:]))})
    bad = [r["preset"] for r in results if max(r["max_abs_diff_per_batch"]) >= 1e-5 or not r["char_ids_identical"]]
    if bad:
        print(f"OUTPUT MISMATCH (max abs diff >= 1e-5 or different char ids) for: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
