"""One readable training loop for the biLM: checkpoints, exact resume, learning curve, export.

Under torchrun (data-parallel, ``elmo_features.util.distributed``) every rank builds the same model (same seed)
and the same batch list with ``batch_tokens x world_size`` tokens per global batch; rank r trains on
``batch[r::world_size]``. The loss of a rank is the *sum* of its predictions' losses over the global prediction
count, and the gradients are summed over the ranks (one flat all-reduce), so a step equals the one-process step on
the whole global batch (the sampled-softmax candidates come from a generator seeded alike on every rank). Rank 0
alone writes checkpoints, the curve and exports; a checkpoint keeps every rank's RNG state so a resume continues
exactly. "Checkpoint now" / "stop now" are decided together (one all-reduce per step with the loss and tokens).
"""
from __future__ import annotations

import errno
import json
import math
import shutil
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from tqdm.auto import tqdm

from elmo_features.util import distributed as D, stop
from elmo_features.util.errors import (CheckpointError, DivergedError, MissingPathError, OutputExistsError,
                                       first_line)
from elmo_features.util.locking import OutputLock
from elmo_features.model.options import BiLMOptions
from elmo_features.model.precision import check_precision
from elmo_features.util.provenance import atomic_open, write_text_atomic
from elmo_features.util.tensor_digest import nested_digest
from elmo_features.util.threads import set_threads
from elmo_features.training.config import TrainConfig, check_resume_config, check_resume_length, saved_config
from elmo_features.training.data import batches_for_epoch, make_batch, type_char_ids, type_targets
from elmo_features.training.evaluate import exp_or_inf, perplexity, read_heldout
from elmo_features.training.prep_cache import (check_no_earlier_results, check_out_dir_is_ours, check_resume_inputs,
                                                 corpus_digest, input_digests, load_or_build_corpus)
from elmo_features.training.export import export_final, export_model
from elmo_features.training.run_checks import check_warmup, not_finite, sample_problem, still_since
from elmo_features.training.lm import BiLanguageModel
from elmo_features.training.vectors import read_vector_table, table_digest, vocabulary_rows
from elmo_features.training.warm_start import resolve_vocab, warm_start
from elmo_features.model.token_vectors import TokenVectors


def lr_at(cfg: TrainConfig, step: int, tokens: int) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine decay by tokens seen to lr * min_lr_ratio."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    frac = min(1.0, tokens / cfg.max_train_tokens)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))


def build_language_model(cfg: TrainConfig, vocab: list[str]) -> tuple[BiLanguageModel, str | None]:
    """The model a config describes (with its static-vector prior, if any) and the prior's digest."""
    block = module = digest = None
    if cfg.token_vectors:
        words, mat = read_vector_table(cfg.token_vectors, cfg.token_vectors_dim)
        kept, sel = vocabulary_rows(cfg.token_vectors, vocab, words, mat, cfg.token_vectors_lowercase)
        digest = table_digest(kept, sel)
        block = {"dim": int(sel.shape[1]), "n_words": len(kept), "lowercase": cfg.token_vectors_lowercase,
                 "source": Path(cfg.token_vectors).name}
        module = TokenVectors(kept, sel, lowercase=cfg.token_vectors_lowercase)
    model = BiLanguageModel(BiLMOptions.from_dict(cfg.elmo_options(block)), len(vocab), cfg.dropout)
    model.bilm.char_cnn.token_vectors = module
    return model, digest


UNK_WARN = 0.10  # a larger share of <UNK> targets makes the held-out perplexity mostly measure predicting <UNK>
STEP = "train-bilm: a training step"  # (what a lost rank's error names)


class Trainer:
    """Trains a BiLanguageModel from a TrainConfig; ``run()`` is resumable bit for bit.

    The trainer holds ``out_dir/train.lock`` from construction until ``run()`` returns (or ``close()``).
    With ``dist`` (torchrun: this rank's ``elmo_features.util.distributed.Dist``) rank 0 holds the lock, prepares
    the corpus and writes every file; the other ranks read them after it."""

    def __init__(self, cfg: TrainConfig, resume: bool = False, progress: bool = True, dist=None):
        self.cfg, self.progress = cfg, progress
        self.dist = dist if dist is not None else D.Dist(0, 1)  # one process: rank 0 of 1
        self.world, self.rank = self.dist.world_size, self.dist.rank
        self.main = self.rank == 0
        self.progress = progress and self.main
        self.out = Path(cfg.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        # one process per out_dir (docs/reliability.md); released at the end of run() or by close()
        self._lock = OutputLock(self.out / "train.lock", f"the training run in {self.out}")
        error = None
        try:
            if self.main:
                check_out_dir_is_ours(self.out)
                self._lock.acquire()
                self._setup(resume)
        except BaseException as e:
            error = e
        if self.world > 1:  # the other ranks set up after rank 0 (reading its corpus cache and vocab)
            failed = D.broadcast(None if error is None else " ".join(str(error).split()) or type(error).__name__)
            if failed is not None and error is None:
                error = D.DistributedError(f"rank 0: {failed}")
            if error is None and not self.main:
                try:
                    self._setup(resume)
                except BaseException as e:
                    error = e
        if error is not None:
            self.close()
            raise error

    def close(self) -> None:
        """Release the out_dir lock (run() does this when it returns)."""
        self._lock.release()

    def _setup(self, resume: bool) -> None:
        cfg = self.cfg
        ckpt = self.out / "checkpoint.pt"
        if ckpt.exists() and not resume:
            raise OutputExistsError(f"{ckpt} exists: pass --resume to continue that run, or choose another out_dir")
        if resume and not ckpt.exists():
            raise MissingPathError(f"--resume: no checkpoint at {ckpt} (start without --resume)")
        if not resume:  # an earlier run's curve and export, with no checkpoint to continue: a fresh start replaces them
            check_no_earlier_results(self.out)
        else:  # before the corpus is prepared; the checkpoint's own config is checked when it is loaded
            check_resume_config(saved_config(self.out), cfg, ckpt)
        set_threads(cfg.threads)
        check_precision(cfg.precision, "cpu")  # bf16 only where it is fast (PrecisionError, exit 2, otherwise)
        self.corpus = load_or_build_corpus(cfg, self.out)
        self.vocab = resolve_vocab(cfg, self.corpus, self.out, ckpt.exists())
        self.type_chars = torch.from_numpy(type_char_ids(self.corpus.types))  # (n_types, 50)
        self.targets = torch.from_numpy(type_targets(self.corpus.types, self.vocab))  # (n_types,)
        self.lengths = np.array([len(s) for s in self.corpus.sentences])
        torch.manual_seed(cfg.seed)
        self.model, self.tv_digest = build_language_model(cfg, self.vocab)
        self.dist.seed_rank(cfg.seed)  # the same model on every rank; other dropout masks
        self._tv_module = self.model.bilm.char_cnn.token_vectors
        self.type_rows = None
        if self._tv_module is not None:
            self.type_rows = self._tv_module.rows(self.type_chars)  # (n_types,)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.state = {"step": 0, "tokens": 0, "epoch": 0, "batch_in_epoch": 0, "elapsed": 0.0,
                      "history": [], "next_eval": cfg.eval_every_tokens}
        self.heldout = read_heldout(cfg, warn=self.main) if cfg.heldout_file else None
        if cfg.init_from and not resume:
            counts = np.bincount(self.targets.numpy(), weights=self.corpus.counts, minlength=len(self.vocab))  # (V,)
            counts[:2] = len(self.corpus.sentences)  # <S>, </S>: one target per sentence and direction
            warm_start(self.model, Path(cfg.init_from), self.vocab, self._tv_module if cfg.token_vectors else None,
                       counts)
            self.state["batch_in_epoch"] = cfg.skip_batches
        corpus_key, digests = corpus_digest(self.out), input_digests(cfg, self.out)
        if resume:
            self._load(ckpt)
            check_resume_inputs(self.state, digests, cfg, self.out, ckpt)
            check_resume_length(self.state["tokens"], saved_config(self.out), cfg, ckpt)
            if self.state.get("token_vectors_digest") != self.tv_digest:
                raise CheckpointError(f"{ckpt}: was trained with other token vectors than {cfg.token_vectors!r} now "
                                      "gives; resume with the same vectors file, or start a new out_dir")
            if self.state.get("corpus_digest", corpus_key) != corpus_key:
                raise CheckpointError(f"{ckpt}: was trained on other training data than {self.out / 'prep.npz'} "
                                      "holds; choose another out_dir")
        self.state["token_vectors_digest"] = self.tv_digest
        self.state["corpus_digest"] = corpus_key
        self.state.update(digests)
        self.state["world_size"] = self.world
        if self.main:
            write_text_atomic(self.out / "config.yaml", yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        self._stop = False

    # -- checkpoints -------------------------------------------------------------------------
    def _save(self) -> None:
        """Write the checkpoint (rank 0; under torchrun every rank calls this together: RNG states)."""
        rng_ranks = None
        if self.world > 1:
            rng_ranks = D.gather_to_main(torch.get_rng_state(), "train-bilm: saving the checkpoint")
            if not self.main:
                return
        ckpt = {
            "model": self.model.state_dict(), "optimizer": self.opt.state_dict(), "state": self.state,
            "torch_rng": torch.get_rng_state(), "sampler_rng": self.gen.get_state(), "config": self.cfg.to_dict(),
        }
        if rng_ranks is not None:
            ckpt["torch_rng_ranks"] = rng_ranks
        ckpt["sha256"] = nested_digest(ckpt)  # (_load: a file damaged since is told, not trained on)
        try:
            with atomic_open(self.out / "checkpoint.pt") as f:
                torch.save(ckpt, f)
        except RuntimeError as e:  # torch reports a write that failed (a full disk) as a RuntimeError
            full = shutil.disk_usage(self.out).free < (64 << 20)
            raise OSError(errno.ENOSPC if full else errno.EIO, "No space left on device" if full else
                          f"the checkpoint could not be written ({first_line(e)})", str(self.out / "checkpoint.pt"))

    def _save_finally(self, ok: bool) -> None:
        """The checkpoint at the end of ``run``; after an error (``ok`` False) a save that fails too (the same full
        disk) is one warning line, and the first error is the one reported."""
        if ok:
            return self._save()
        try:
            self._save()
        except (OSError, RuntimeError) as e:
            print(f"warning: the checkpoint could not be saved either ({first_line(e)}); a resume starts from the "
                  "last one saved", file=sys.stderr)

    def _load(self, path: Path) -> None:
        try:
            ckpt = torch.load(path, weights_only=True)
        except Exception as e:  # truncated, foreign or not a torch file
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            raise CheckpointError(f"{path}: not a readable checkpoint ({first}); the file is damaged: delete it "
                                  "and start the run again in a new out_dir") from None
        keys = ("model", "optimizer", "state", "torch_rng", "sampler_rng", "config")
        if not isinstance(ckpt, dict) or any(k not in ckpt for k in keys):
            raise CheckpointError(f"{path}: not a train-bilm checkpoint (expected keys {', '.join(keys)})")
        recorded = ckpt.pop("sha256", None)  # (checkpoints saved before it: unchecked)
        if recorded is not None and recorded != nested_digest(ckpt):
            raise CheckpointError(f"{path}: its content does not match the checksum it was saved with (the file is "
                                  "damaged, or was edited): restore it from a copy, or start again in a new out_dir")
        check_resume_config(ckpt["config"], self.cfg, path)
        saved_world = ckpt["state"].get("world_size", 1)
        if saved_world != self.world:
            raise CheckpointError(f"{path}: was trained by {saved_world} process(es), this launch has {self.world}; "
                                  f"resume with {saved_world} (the global batches depend on it), or start a new out_dir")
        try:
            self.model.load_state_dict(ckpt["model"])
            self.opt.load_state_dict(ckpt["optimizer"])
            torch.set_rng_state(ckpt["torch_rng_ranks"][self.rank] if self.world > 1 else ckpt["torch_rng"])
            self.gen.set_state(ckpt["sampler_rng"])
        except (RuntimeError, ValueError, KeyError, TypeError) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            raise CheckpointError(f"{path}: does not fit this model ({first}); choose another out_dir") from None
        self.state = ckpt["state"]

    def _on_signal(self, signum, _frame) -> None:
        self._stop = True
        self.stop_signal = signum  # (the command exits with 128 + signum after saving)

    # -- training ----------------------------------------------------------------------------
    def train_step(self, idx: np.ndarray) -> tuple[float, int]:
        """One optimiser step on the global batch ``idx``; returns (this rank's share of the mean loss, its real
        tokens): in one process the mean loss and the batch's tokens. Under torchrun this rank trains on its slice
        and the gradients are summed over the ranks (the loss and tokens are summed by the caller)."""
        cfg = self.cfg
        idx = self.dist.shard(idx)
        self.model.train()
        frozen = self.state["step"] < cfg.init_freeze_steps  # warm start: the fresh softmax learns alone first
        for p in self.model.bilm.parameters():
            p.requires_grad_(not frozen)
        self.opt.zero_grad(set_to_none=True)
        tokens, value = 0, 0.0
        if len(idx):
            type_ids, lengths = make_batch(self.corpus.sentences, idx)  # (B, T), (B,)
            targets = torch.where(type_ids >= 0, self.targets[type_ids.clamp(min=0)], 0)  # (B, T)
            with self.autocast():
                top = self.model.hidden_states(type_ids, lengths, self.type_chars, self.type_rows)  # (B, T, 2P)
                h_f, y_f, h_b, y_b = self.model.prediction_pairs(top, targets, lengths)
                h, y = torch.cat([h_f, h_b]), torch.cat([y_f, y_b])  # (2N, P), (2N,)
                total = int(D.sum_over_ranks([h.shape[0]], STEP)[0])  # the global number of predictions
                loss = self.model.sampled_softmax_loss(h, y, cfg.n_negative_samples, self.gen, denominator=total)
            loss.backward()
            tokens, value = int((lengths - 2).sum()), float(loss.detach())
        else:  # an empty slice (torchrun): no loss, but the same collectives and sampler draws as the other ranks
            D.sum_over_ranks([0], STEP)
            torch.multinomial(self.model.log_uniform, cfg.n_negative_samples, replacement=True, generator=self.gen)
        for g in self.opt.param_groups:
            g["lr"] = lr_at(cfg, self.state["step"], self.state["tokens"])
        D.allreduce_grads(list(self.model.parameters()), STEP)  # the global batch's gradient (one process: as is)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
        self.opt.step()
        return value, tokens

    def autocast(self):
        """The forward pass's precision context: bf16 autocast (bf16 matmuls, fp32 accumulation and master
        weights) when the config says precision bf16, else a no-op."""
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cfg.precision == "bf16")

    def evaluate(self) -> dict:
        """Full-softmax perplexity on the held-out sample (forward, backward, mean)."""
        return perplexity(self.model, self.heldout, self.vocab)

    def run(self) -> dict:
        """Train to max_train_tokens (or until SIGINT/SIGTERM/SIGHUP); save a checkpoint; release the lock. A warm-up
        longer than the run is refused (or warned about) before the first step."""
        try:
            check_warmup(self.cfg, self.lengths, self.world, warn=self.main)
            return self._run()
        finally:
            self.close()

    def _run(self) -> dict:
        cfg, st = self.cfg, self.state
        old = {s: signal.signal(s, self._on_signal) for s in stop.stop_signals()}  # SIGHUP too: a closed terminal
        last_ckpt = time.time()
        t0 = time.time() - st["elapsed"]
        bar = tqdm(total=cfg.max_train_tokens, initial=st["tokens"], unit="tok", unit_scale=True,
                   disable=not self.progress, desc="train-bilm", smoothing=0.05)
        ema = None
        ok = self.diverged = False
        self._snapshot = still_since(self.model, None, cfg, st["tokens"])[0]  # (the first evaluation's reference)
        try:
            while st["tokens"] < cfg.max_train_tokens and not self._stop:
                batches = batches_for_epoch(self.lengths, cfg.batch_tokens * self.world, cfg.seed, st["epoch"])
                while st["batch_in_epoch"] < len(batches) and st["tokens"] < cfg.max_train_tokens:
                    loss, n = self.train_step(batches[st["batch_in_epoch"]])
                    save_now = time.time() - last_ckpt > 60 * cfg.checkpoint_minutes
                    # the global loss and tokens; checkpoint (rank 0's clock) / stop together (one process: as is)
                    loss, n, save_now, self._stop = self._reduce_step(loss, n, save_now and self.main)
                    if not math.isfinite(loss):  # nothing of a diverged model is saved (the last checkpoint stays)
                        raise self._diverged(st["step"] + 1, f"the loss is {loss}")
                    st["batch_in_epoch"] += 1
                    st["step"] += 1
                    st["tokens"] += n
                    st["elapsed"] = time.time() - t0
                    ema = loss if ema is None else 0.98 * ema + 0.02 * loss
                    bar.update(n)
                    bar.set_postfix(loss=f"{ema:.3f}", sampled_ppl=f"{exp_or_inf(ema):.0f}", epoch=st["epoch"],
                                    refresh=False)
                    if self.heldout and st["tokens"] >= st["next_eval"]:
                        self._eval_point()
                    if self._stop:
                        break
                    if save_now:
                        self._save()
                        last_ckpt = time.time()
                else:
                    if st["batch_in_epoch"] >= len(batches):
                        st["epoch"] += 1
                        st["batch_in_epoch"] = 0
            finished = st["tokens"] >= cfg.max_train_tokens
            if finished and self.heldout and (not st["history"] or st["history"][-1]["tokens"] != st["tokens"]):
                self._eval_point()  # (before the final checkpoint: it records this point)
            problem = finished and not self.heldout and sample_problem(self.model, self.corpus, self.vocab, cfg)
            if problem:  # without held-out evaluations the export is checked on training text (every rank alike)
                raise self._diverged(st["step"], problem)
            ok = True
        finally:
            bar.close()
            st["elapsed"] = time.time() - t0
            if (ok or self.world == 1) and not self.diverged:  # (a failed torchrun rank cannot join the others' save)
                self._save_finally(ok)
            for s, h in old.items():
                signal.signal(s, h)
        if finished and self.main:  # no held-out evaluations, or their export deleted or damaged since: export now
            export_final(self.model, self.vocab, self.out / "export", always=not self.heldout)
        return {"finished": finished, **{k: st[k] for k in ("step", "tokens", "epoch", "elapsed")}}

    def _reduce_step(self, loss: float, tokens: int, save: bool) -> tuple[float, int, bool, bool]:
        """(loss, tokens) summed over the ranks; save / stop if any rank asks."""
        loss, tokens, save, stop = D.sum_over_ranks([loss, tokens, save, self._stop], STEP)
        return loss, int(tokens), save > 0, stop > 0

    def _diverged(self, step: int, what: str) -> DivergedError:
        """The one-line error of a diverged training (``what``: the non-finite value seen); nothing more is saved."""
        self.diverged = True
        kept = ("no checkpoint or export was written after it: lower lr and --resume from the last checkpoint, or start "
                "again" if (self.out / "checkpoint.pt").exists() else "nothing was saved: lower lr and start again"
                + (" in another out_dir (this one keeps the earlier evaluations)" if (self.out / "curve.json").exists()
                   else ""))
        return DivergedError(f"training diverged at step {step}: {what} (lr {self.cfg.lr:g} may be too large); {kept}")

    def _eval_point(self) -> None:
        st = self.state
        if not self.main:  # rank 0 evaluates, writes the curve and exports (the others keep the same bookkeeping)
            st["history"].append({"tokens": st["tokens"], "step": st["step"]})
            st["next_eval"] = st["tokens"] + self.cfg.eval_every_tokens
            return
        ppl = self.evaluate()
        problem = not_finite(ppl)
        if problem:  # nothing of it is written: the last checkpoint and export stay
            raise self._diverged(st["step"], problem.replace("perplexity", "held-out perplexity"))
        st["history"].append({"tokens": st["tokens"], "step": st["step"], "elapsed": st["elapsed"], **ppl})
        st["next_eval"] = st["tokens"] + self.cfg.eval_every_tokens
        write_text_atomic(self.out / "curve.json", json.dumps(st["history"], indent=2) + "\n")
        export_model(self.model, self.vocab, self.out / "export")
        unk = ppl.get("unk_rate", 0.0)
        tqdm.write(f"[{st['tokens']:,} tokens, {st['elapsed'] / 60:.1f} min] held-out ppl "
                   f"fwd {ppl['forward']:.1f} bwd {ppl['backward']:.1f} mean {ppl['mean']:.1f} "
                   f"({unk:.0%} of predictions are <UNK>)")
        if not getattr(self, "_still_warned", False):  # once; against the parameters of the last evaluation
            self._snapshot, self._still_warned = still_since(self.model, getattr(self, "_snapshot", None), self.cfg,
                                                             st["tokens"])
        if unk > UNK_WARN and not getattr(self, "_unk_warned", False):  # once: the held-out file stays the same
            self._unk_warned = True
            tqdm.write(f"warning: heldout_file {self.cfg.heldout_file}: {unk:.0%} of its predictions are <UNK> (words "
                       f"outside the {len(self.vocab) - 3:,}-word vocabulary): the held-out perplexity mostly measures "
                       "predicting <UNK>; give held-out text of the training domain, or see forward_no_unk in "
                       "curve.json", file=sys.stderr)
