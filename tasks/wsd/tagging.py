"""Plain text tagged with a sense file (``elmo-tasks wsd tag``, ``SenseTagger`` in Python): each content word gets
the sense whose vectors fit its context best (the file itself: ``sense_file``).
"""
from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from elmo_features.util.arguments import check_bool, check_sentences

from elmo_features.util.errors import ElmoTasksError, StaleCacheError, UsageError
from elmo_features.util.once import first_time

from elmo_tasks.components import resolve_component
from elmo_tasks.data.tokenizer import tokenize, tokenize_spans, whitespace_spans
from elmo_tasks.wsd.data.reader import POS_TAGS
from elmo_tasks.features.base import FeatureContext, build_features, section_fingerprints, section_frozen_description
from elmo_tasks.registry import FEATURES
from elmo_tasks.wsd.vectors import all_layers
from elmo_tasks.wsd.knn import _unit
from elmo_tasks.wsd.data.morphy import Morphy
from elmo_tasks.wsd.multiword import MultiwordIndex
from elmo_tasks.wsd.pos_head import read_pos_head, token_vectors
from elmo_tasks.wsd.sense_file import (check_recipe, check_shapes, non_finite_senses, prior_weight, read_sense_file,
                                       sense_digest, wordnet_folder)
from elmo_tasks.wsd.sense_method import load_graph
from elmo_tasks.wsd.senses import wordnet_fingerprint
from elmo_tasks.wsd.tag_output import (FUNCTION_WORD, NO_CONTEXT, NO_VECTOR, NOT_IN_WORDNET, PUNCTUATION, TaggedSentence,
                                       TaggedText, TaggedToken, synset_name)

# closed-class words: not tagged unless the token names a part of speech (WordNet lists a few of them as rare nouns or
# adjectives, e.g. "it" as information technology, "I" as the numeral one). Words that the WSD test sets tag as
# content words (be, have and do in every form, not, so, then, here, there, as, about, ...) are not among them.
FUNCTION_WORDS = frozenset("""a an the this that these those some any each every both either neither i me my mine
we us our ours you your yours he him his she her hers it its they them their theirs who whom whose which what
and or but nor if than because although though of at by for from in into on onto to with
without within among between under through during after up out off
will would shall should can could may might must""".split())
# words that are content words in some uses and closed-class in others ("as" an adverb or a preposition): tagged,
# unless the sense file's part-of-speech head reads the token as a closed-class tag (``CLOSED_TAGS``)
SOMETIMES_CONTENT = frozenset("""is am are was were be been being do does did have has had not so then here there
as about yet no all above below before down over while""".split())
CLOSED_TAGS = frozenset({"DET", "ADP", "PRON", "CONJ", "PRT"})
UNTOKENIZED_SHARE = 0.1  # --pretokenized text with this share of words glued to punctuation is said not tokenized


class SenseTagger:
    """Disambiguates text with a sense file: every content word whose form (by WordNet's morphy) has senses gets the
    one with the highest score, ``cos(v, context) + w_pos * cos(v, gloss)`` (``prior``: + the first-sense prior the
    file chose / the sense number). A token can name its part of speech (``bank/NOUN``); otherwise, for a word with
    senses in several parts of speech, the file's part-of-speech head picks one from the word's context (a file
    without a head: the part of speech whose senses SemCor tags most often for the word, every part of speech when
    SemCor has none); function words are left untagged. ``wordnet``: the WordNet folder (default: the one the file
    names, else data/wordnet-3.0)."""

    def __init__(self, path: str | Path, wordnet: str | Path | None = None, context: FeatureContext | None = None,
                 prior: bool = False):
        prior = check_bool(prior, "SenseTagger: prior")
        self.meta, self.keys, raw, recorded, meta_recorded, meta_edited = read_sense_file(path)
        self.context = _unit(raw["context"].astype(np.float64))
        self.gloss = _unit(raw["gloss"].astype(np.float64))
        self.has, self.counts = raw["step"] >= 0, raw["counts"]
        check_shapes(path, self.keys, self.context, self.gloss, self.has, self.counts)
        edited = (recorded is None and meta_recorded is not None  # (both are written since the meta checksum)
                  or recorded is not None and recorded != sense_digest(self.keys, *raw.values()))  # (whole, but edited)
        if meta_edited:  # the recipe of every query: its layers, w, the prior, the source
            raise StaleCacheError(f"{path}: its meta attribute (layers, w, prior, source) does not match the checksum "
                                  "written with it (edited or damaged); make it again with `elmo-tasks wsd senses --source SOURCE --out FILE`")
        self.prior = prior_weight(self.meta, path, "SenseTagger(prior=True)") if prior else 0.0
        folder = wordnet_folder(path, self.meta, wordnet)
        self.graph = load_graph(folder)
        now = wordnet_fingerprint(self.graph.wn)
        if now != self.meta["wordnet_fingerprint"]:
            raise StaleCacheError(f"{path} was made with another WordNet (fingerprint "
                                  f"{self.meta['wordnet_fingerprint'][:12]}) than {folder} ({now[:12]}); give the "
                                  "WordNet it was made with (--wordnet), or make the sense file again")
        context = context or FeatureContext()
        section = resolve_component(FEATURES, self.meta["section"], f"{path}: section")
        try:
            fps = section_fingerprints(section, context.memo)
        except ElmoTasksError as e:  # e.g. an encoder folder moved since: say which file recorded it
            raise StaleCacheError(f"{path} was made with a feature source that does not load now ({e}); put it back where "
                          "the file recorded it, or make the sense file again") from None
        if fps != self.meta["fingerprints"]:
            raise StaleCacheError(f"{path} was made with another feature source: "
                                  f"{section_frozen_description(section)} changed since (fingerprint "
                                  f"{', '.join(f[:12] for f in self.meta['fingerprints'])} then, "
                                  f"{', '.join(f[:12] for f in fps)} now); make the sense file again")
        self.source = build_features(section, replace(context, cache_dir=None))
        if self.context.shape[1] != self.source.output_dim:
            raise StaleCacheError(f"{path}: its vectors have dimension {self.context.shape[1]}, but its feature source "
                                  f"gives {self.source.output_dim}; the file is damaged: make it again with "
                                  "`elmo-tasks wsd senses --source SOURCE --out FILE`")
        check_recipe(path, self.meta, self.source)
        if edited:  # (after the checks that name what is misshapen; before the head, whose checksum covers them)
            raise StaleCacheError(f"{path}: its datasets do not match the checksum written with them (edited or "
                                  "damaged); make it again with `elmo-tasks wsd senses --source SOURCE --out FILE`")
        bad, in_context, in_gloss = non_finite_senses(raw["context"], raw["gloss"])
        if bad:  # (written whole by a version that did not check: every score of those senses would be NaN)
            raise StaleCacheError(f"{path}: {bad:,} of {len(self.keys):,} senses have NaN or infinite vectors "
                                  f"({in_context:,} context, {in_gloss:,} gloss), so it cannot tag: its feature "
                                  "source gave non-finite values (a diverged or damaged model); make it again from a "
                                  "sound model with `elmo-tasks wsd senses --source SOURCE --out FILE`")
        self.pos_head = read_pos_head(path, self.source.output_dim, len(self.meta["layers"]), self.meta)  # (None:
        # the count)
        self.index = {k: i for i, k in enumerate(self.keys)}
        self.by_lemma: dict[tuple[str, str], list[str]] = {}
        for k in self.keys:
            self.by_lemma.setdefault((k.partition("%")[0], self.graph.wn.pos_of(k)), []).append(k)
        for ks in self.by_lemma.values():
            ks.sort(key=lambda k: self.graph.wn.sense_number.get(k, 10 ** 6))
        self.morphy = Morphy(self.graph.wn.folder, set(self.by_lemma))
        self.multiword = MultiwordIndex(self._multiword_lemmas(), self.morphy)

    def _multiword_lemmas(self) -> list[tuple[str, str]]:
        """The multi-word lemmas ``tag`` joins (``multiword``): those SemCor tags at least once and whose senses have
        vectors, of any part of speech ("of course", "a few" too). On SemCor's held-out documents as raw text this
        rule scores best: F1 75.4, against 75.0 for nouns and verbs only, 74.6 for every WordNet multi-word lemma,
        73.2 for none (results/wsd_raw/multiword_rule/)."""
        return [(lemma, pos) for (lemma, pos), ks in self.by_lemma.items() if "_" in lemma
                and any(self.has[self.index[k]] for k in ks) and sum(int(self.counts[self.index[k]]) for k in ks) > 0]

    def candidates(self, word: str, pos: str | None) -> list[str]:
        """Every sense key of the word's base forms for ``pos``; without one, of the part of speech SemCor tags most
        often for the word (every part of speech when it tags none), and none for a function word."""
        return self._lookup(word, pos)[0]

    def _lookup(self, word: str, pos: str | None,
                tag_probs: dict[str, float] | None = None) -> tuple[list[str], str | None, str | None]:
        """``candidates``, when there are none why (``tag_output``'s reasons), and where their part of speech came
        from (``tag_output.POS_FROM``); ``tag_probs``: the head's probability of each tag for this token."""
        if not isinstance(word, str) or not word.strip():
            raise TypeError(f"SenseTagger.candidates: word must be a non-empty str, got {type(word).__name__} "
                            f"{word!r:.40}")
        if pos is not None:  # (a tag in any letter case, as `wsd tag` reads bank/noun)
            if not isinstance(pos, str) or pos.upper() not in POS_TAGS:
                raise ValueError(f"SenseTagger.candidates: pos {pos!r}; give one of {', '.join(POS_TAGS)} (any letter "
                                 "case) or None")
            pos = pos.upper()
        if pos is None and word.lower() in FUNCTION_WORDS:
            return [], FUNCTION_WORD, None
        if (pos is None and tag_probs and word.lower() in SOMETIMES_CONTENT
                and max(tag_probs, key=tag_probs.get) in CLOSED_TAGS):  # ("as" a preposition)
            return [], FUNCTION_WORD, None
        by_pos, known = {}, False
        for p in ([pos] if pos else POS_TAGS):
            every = [k for base in self.morphy.base_forms(word, p) for k in self.by_lemma.get((base, p), [])]
            keys = [k for k in every if self.has[self.index[k]]]
            known = known or bool(every)
            if keys:
                by_pos[p] = keys
        if not by_pos:
            return [], (NO_VECTOR if known else NOT_IN_WORDNET + (f" as {pos}" if pos else "")
                        if any(c.isalnum() for c in word) else PUNCTUATION), None
        return self._choose_pos(by_pos, pos, tag_probs)

    def _choose_pos(self, by_pos: dict[str, list[str]], pos: str | None,
                    tag_probs: dict[str, float] | None) -> tuple[list[str], None, str]:
        """The candidates of one of ``by_pos``'s parts of speech (``pos`` when marked; else the head's most probable,
        else SemCor's count, else WordNet's tag counts), and where it came from."""
        if pos is not None or len(by_pos) < 2:
            return [k for keys in by_pos.values() for k in keys], None, "mark" if pos else "wordnet"
        if tag_probs is not None:  # the head's most probable of the word's parts of speech
            return by_pos[max(by_pos, key=lambda p: tag_probs.get(p, 0.0))], None, "head"
        tagged = {p: int(sum(self.counts[self.index[k]] for k in keys)) for p, keys in by_pos.items()}
        if not any(tagged.values()):  # (a file built without SemCor: WordNet's own tag counts)
            tagged = {p: sum(self.graph.wn.tag_count.get(k, 0) for k in keys) for p, keys in by_pos.items()}
        best = max(tagged, key=tagged.get)  # the first of equals: nouns, verbs, adjectives, adverbs
        return (by_pos[best] if tagged[best] > 0 else [k for keys in by_pos.values() for k in keys]), None, "count"

    def tag(self, text: str | list[list[str]], pretokenized: bool = False) -> TaggedText:
        """Tag ``text``: a str, each line a sentence, split by the package's PTB-style tokenizer (``pretokenized``:
        on whitespace; blank lines are skipped), or a list of sentences as token lists (offsets then count in the
        tokens joined by single spaces). Returns a ``TaggedSentence`` per sentence, a ``TaggedToken`` per token
        (``tag_output``: ``print`` shows the text format, ``token["key"]`` reads a field)."""
        lines = _spans_of(text, check_bool(pretokenized, "SenseTagger.tag: pretokenized"))
        parsed = [[_split_pos_span(*t) for t in toks] for _, _, toks in lines]  # [[(word, pos, start, end)]]
        _warn_unknown_tags([[(w, p) for w, p, _, _ in s] for s in parsed])
        if pretokenized and isinstance(text, str):
            self._warn_untokenized([w for s in parsed for w, *_ in s])
        todo = [[w for w, *_ in s] for s in parsed if s]  # (a line without a token, e.g. a soft hyphen: not embedded)
        arrays = iter(all_layers(self.source, todo, "tag") if todo else [])  # [(L, n, D)]
        weights = np.asarray(self.meta["layers"], dtype=np.float64)
        out = TaggedText()
        for (line_text, number, _), s in zip(lines, parsed):
            layers = next(arrays) if s else None  # (L, n, D)
            vecs = token_vectors(layers, weights) if s else []  # (n, D)
            probs = (self.pos_head.probabilities(token_vectors(layers, self.pos_head.layers))
                     if s and self.pos_head is not None else [None] * len(s))
            tokens = []
            for a, b, pairs in self.multiword.units([w for w, *_ in s], [p is not None for _, p, _, _ in s]):
                if not pairs:
                    tokens.append(self._tag_token(*s[a], vecs[a], probs[a]))
                    continue
                v = token_vectors(layers[:, a:b].mean(axis=1, keepdims=True), weights)[0]  # (D,), as SemCor's pooling
                p = None if probs[a] is None else {t: float(np.mean([q[t] for q in probs[a:b]])) for t in probs[a]}
                start, end = s[a][2], s[b - 1][3]
                tokens.append(self._tag_multiword(line_text[start:end], pairs, start, end, v, p))
            out.append(TaggedSentence(line_text, tokens, number))
        return out

    def _warn_untokenized(self, words: list[str]) -> None:
        """One warning (once per command) when ``UNTOKENIZED_SHARE`` or more of the words (those with a letter or a
        digit) hold punctuation at an edge that keeps them from WordNet ("bank,", "river.") while a piece the
        tokenizer splits off is found (with its part-of-speech mark: "bank/VERB," holds bank/VERB): the text given as
        tokenized does not look tokenized."""
        content = [w for w in words if any(c.isalnum() for c in w)]
        glued = [w for w in content if not (w[0].isalnum() and w[-1].isalnum()) and len(tokenize(w)) > 1
                 and not self._lookup(w, None)[0] and any(self._lookup(*_split_pos(t))[0] for t in tokenize(w)
                                                          if any(c.isalnum() for c in t))]
        if glued and len(glued) >= UNTOKENIZED_SHARE * len(content) and first_time(("wsd tag: untokenized",)):
            shown = ", ".join(repr(w) for w in list(dict.fromkeys(glued))[:3])
            print(f"warning: {len(glued):,} of the {len(content):,} words split on whitespace alone keep punctuation "
                  f"at their edge ({shown}{', ...' if len(set(glued)) > 3 else ''}), so WordNet has no sense for them "
                  "as they are; the text does not look tokenized: drop --pretokenized (pretokenized=False) to have "
                  "the tokenizer split the punctuation off", file=sys.stderr)

    def _tag_multiword(self, text: str, pairs: list[tuple[str, str]], start: int, end: int, v: np.ndarray,
                       tag_probs: dict[str, float] | None) -> TaggedToken:
        """The sense of a multi-word unit (``text`` at ``start:end``) among the senses of its (lemma, part of
        speech) ``pairs``, for the mean of its words' vectors ``v`` (D,)."""
        by_pos: dict[str, list[str]] = {}
        for lemma, pos in pairs:
            by_pos.setdefault(pos, []).extend(k for k in self.by_lemma.get((lemma, pos), []) if self.has[self.index[k]])
        cands, _, pos_from = self._choose_pos({p: ks for p, ks in by_pos.items() if ks}, None, tag_probs)
        return self._sense_token(text, start, end, cands, v, pos_from)

    def best_sense(self, cands: list[str], v: np.ndarray) -> tuple[str, float, float | None]:
        """(key, score, margin) of the candidate sense keys' best for the word vector ``v`` (D,), unit length:
        score = cos(v, context) + w_pos x cos(v, gloss) (+ prior / sense number); margin over the second best (None:
        one candidate). Every key must have vectors (``has``)."""
        rows = np.array([self.index[k] for k in cands])
        w = np.array([self.meta["w"].get(self.graph.wn.pos_of(k), 0.0) for k in cands])
        rank = np.array([self.graph.wn.sense_number.get(k, 10 ** 6) for k in cands], dtype=np.float64)
        score = self.context[rows] @ v + w * (self.gloss[rows] @ v) + self.prior / rank  # (C,)
        best = int(np.argmax(score))
        margin = float(score[best] - np.delete(score, best).max()) if len(cands) > 1 else None
        return cands[best], float(score[best]), margin

    def _tag_token(self, word: str, pos: str | None, start: int, end: int, v: np.ndarray,
                   tag_probs: dict[str, float] | None = None) -> TaggedToken:
        """The sense of ``word`` (part of speech ``pos`` or None) whose score for its vector ``v`` (D,) is highest;
        ``tag_probs``: the head's tag probabilities for the token."""
        cands, reason, pos_from = self._lookup(word, pos, tag_probs)
        if not cands or not v.any():
            return TaggedToken(word, start, end, pos=pos, reason=reason or NO_CONTEXT)
        return self._sense_token(word, start, end, cands, v, pos_from)

    def _sense_token(self, word: str, start: int, end: int, cands: list[str], v: np.ndarray,
                     pos_from: str | None) -> TaggedToken:
        """The tagged token of ``word`` with the best of ``cands`` for its vector ``v`` (D,)."""
        if not v.any():
            return TaggedToken(word, start, end, reason=NO_CONTEXT)
        key, best_score, margin = self.best_sense(cands, v)
        wn = self.graph.wn
        syn = wn.synsets[wn.synset_of[key]]
        return TaggedToken(word, start, end, key=key, lemma=key.partition("%")[0], pos=wn.pos_of(key),
                           synset=f"{syn.id[1:]}-{syn.id[0]}", synset_name=synset_name(wn, syn.id),
                           lemmas=tuple(x.replace("_", " ") for x in syn.lemmas), gloss=syn.gloss,
                           score=round(best_score, 6), margin=None if margin is None else round(margin, 6),
                           pos_from=pos_from)


def _spans_of(text, pretokenized: bool) -> list[tuple[str, int, list[tuple[str, int, int]]]]:
    """(line text, line number, [(token, start, end)]) per sentence of ``SenseTagger.tag``'s input."""
    if isinstance(text, str):
        split = whitespace_spans if pretokenized else tokenize_spans
        lines = [(t, i, split(t)) for i, t in enumerate(text.split("\n"), 1) if t.strip()]
        if not lines:
            raise UsageError("SenseTagger.tag: text is empty or blank; give one sentence per line")
        return lines
    sentences = check_sentences(text)  # a sentence as one string, a None token: one clear error
    out = []
    for i, tokens in enumerate(sentences, 1):
        spans, at = [], 0
        for t in tokens:  # (offsets in the tokens joined by single spaces)
            spans.append((t, at, at + len(t)))
            at += len(t) + 1
        out.append((" ".join(tokens), i, spans))
    return out


def _warn_unknown_tags(parsed: list[list[tuple[str, str | None]]]) -> None:
    """Tokens ending in "/" + capitals that are no part of speech (bank/NUON), and tokens with two marks
    (bank/NOUN/VERB: the word part bank/NOUN), are looked up whole (as a word holding a slash): each said once per
    command, naming the first few."""
    twice = list(dict.fromkeys(f"{w}/{p}" for s in parsed for w, p in s if p and _split_pos(w)[1]))
    if twice and first_time(("wsd tag: two part-of-speech marks",)):  # (bank/NOUN/VERB: the word part is bank/NOUN)
        print(f"warning: {len(twice)} token(s) carry two part-of-speech marks ({', '.join(twice[:3])}"
              f"{', ...' if len(twice) > 3 else ''}): the last is read as the part of speech and the rest looked up "
              f"whole, as a word holding a slash ({twice[0].rpartition('/')[0]}); give one mark per word",
              file=sys.stderr)
    odd = list(dict.fromkeys(w for s in parsed for w, p in s if re.fullmatch(r".+/[A-Z]{2,}", w)
                             and not (p and _split_pos(w)[1])))
    if odd and first_time(("wsd tag: unknown part-of-speech tags",)):
        print(f"warning: {len(odd)} token(s) end in /CAPITALS that are not a part of speech ({', '.join(odd[:3])}"
              f"{', ...' if len(odd) > 3 else ''}): they are looked up whole; the tags are {', '.join(POS_TAGS)}",
              file=sys.stderr)


def _split_pos_span(token: str, start: int, end: int) -> tuple[str, str | None, int, int]:
    """``_split_pos`` with the token's offsets: a mark's ``/NOUN`` is left out of the word's span."""
    word, pos = _split_pos(token)
    return word, pos, start, max(start + 1, end - (len(token) - len(word)))


def _split_pos(token: str) -> tuple[str, str | None]:
    """``bank/NOUN`` (or ``bank/noun``: any letter case) -> ("bank", "NOUN"); a token without a known tag ->
    (token, None)."""
    word, sep, tag = token.rpartition("/")
    return (word, tag.upper()) if sep and word and tag.upper() in POS_TAGS else (token, None)
