"""``elmo-tasks data get wsd-framework``: the WSD Evaluation Framework of Raganato, Camacho-Collados & Navigli
(EACL 2017), verified, into ``data/wsd/<name>/`` folders the ``wsd`` command reads.

The framework is one zip from its official address (downloaded resumably and checked by ``download_url``), or a
copy the user fetched by hand (``--from ZIP_OR_FOLDER``). Only the data sets below are read from it (never the
1.3 GB SemCor+OMSTI file), and nothing is written in place before every one of them is verified: its XML parses,
its instance ids and its gold key file match one to one, every gold key is a WordNet 3.0 sense key, and its
instance count equals the published one. The folders are built in a temporary folder and moved into place
with one rename, with a SOURCE.md (address, the zip's sha256, the terms of the framework's README, the SemCor
and WordNet licences).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from elmo_features.formats.download import DownloadError, default_cache_dir, download_url, file_sha256, files_table
from elmo_features.util.errors import ElmoTasksError, MissingPathError

from elmo_tasks.data.fetched import already_fetched, claim, put_in_place
from elmo_tasks.wsd.data.inventory import InventoryError, SenseInventory, find_index_sense
from elmo_tasks.wsd.data.reader import WsdFormatError, load_dataset

URL = "http://lcl.uniroma1.it/wsdeval/data/WSD_Evaluation_Framework.zip"
URL_ENV = "ELMO_TASKS_WSD_FRAMEWORK_URL"  # a mirror (or a loopback server in tests)
ZIP_NAME = "WSD_Evaluation_Framework.zip"
FOLDER = "wsd"  # data/wsd/<name>/
NAME = "wsd-framework"
CITATION = ("Alessandro Raganato, Jose Camacho-Collados and Roberto Navigli (2017). Word Sense Disambiguation: A "
            "Unified Evaluation Framework and Empirical Comparison. Proceedings of EACL 2017, Valencia, Spain.")


@dataclass(frozen=True)
class FrameworkSet:
    """One data set of the framework: its folder inside the framework, and its published instance count."""

    name: str  # the file stem (NAME.data.xml) and the output folder data/wsd/NAME/
    inner: str  # e.g. "Evaluation_Datasets/senseval2"
    instances: int

    def members(self) -> tuple[str, str]:
        """The data and gold key files, relative to the framework's root folder."""
        return f"{self.inner}/{self.name}.data.xml", f"{self.inner}/{self.name}.gold.key.txt"


# Raganato et al. (2017), Table 2 and the framework's release: instances per data set.
MANIFEST: tuple[FrameworkSet, ...] = (
    FrameworkSet("senseval2", "Evaluation_Datasets/senseval2", 2282),
    FrameworkSet("senseval3", "Evaluation_Datasets/senseval3", 1850),
    FrameworkSet("semeval2007", "Evaluation_Datasets/semeval2007", 455),
    FrameworkSet("semeval2013", "Evaluation_Datasets/semeval2013", 1644),
    FrameworkSet("semeval2015", "Evaluation_Datasets/semeval2015", 1022),
    FrameworkSet("ALL", "Evaluation_Datasets/ALL", 7253),
    FrameworkSet("semcor", "Training_Corpora/SemCor", 226036),
)
TOP_FOLDERS = ("Evaluation_Datasets/", "Training_Corpora/")


def layout(manifest: tuple[FrameworkSet, ...]) -> str:
    """The framework's layout in words: each folder of data sets with the files one holds."""
    groups: dict[str, list[FrameworkSet]] = {}
    for s in manifest:
        groups.setdefault(s.inner.rsplit("/", 1)[0], []).append(s)
    parts = []
    for top, sets in groups.items():
        if len(sets) == 1:
            s = sets[0]
            parts.append(f"{s.inner}/{s.name}.data.xml + {s.name}.gold.key.txt")
        else:
            parts.append(f"{top}/<name>/<name>.data.xml + <name>.gold.key.txt for {', '.join(s.name for s in sets)}")
    return "; ".join(parts)


class NotPublished(WsdFormatError):
    """A data set that reads and checks as a data set, but differs from the published release (its counts, or gold
    keys that are not WordNet 3.0's): ``wsd --train/--test`` can use it as it is."""


class Framework:
    """Read access to the framework's files in its zip or its unpacked folder, by path under its root folder
    (``Evaluation_Datasets/...``), whatever folder the zip or the user put around it."""

    def __init__(self, path: Path):
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        if path.is_dir():
            roots = [p for p in (path, path / "WSD_Evaluation_Framework") if (p / "Evaluation_Datasets").is_dir()]
            if not roots:
                raise WsdFormatError(f"{path}: no Evaluation_Datasets folder in it or in its WSD_Evaluation_Framework "
                                     f"folder; give the framework's zip or the folder it unpacks to (layout: "
                                     f"{layout(MANIFEST)})")
            self._root = roots[0]
            return
        try:
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as e:
            raise WsdFormatError(f"{path}: not a readable zip ({e}); delete it and fetch again, or give the "
                                 "unpacked folder with --from") from None
        prefixes = {n[: n.index(top)] for n in self._zip.namelist() for top in TOP_FOLDERS if top in n}
        if len(prefixes) != 1:
            raise WsdFormatError(f"{path}: expected one folder holding Evaluation_Datasets/ and Training_Corpora/, "
                                 f"found {len(prefixes)}; is this the WSD Evaluation Framework zip? (layout: "
                                 f"{layout(MANIFEST)})")
        self._prefix = prefixes.pop()

    @property
    def is_zip(self) -> bool:
        return self._zip is not None

    def label(self, inner: str) -> str:
        """How messages name a file: ``ZIP!member`` or its path, as the user gave the zip or folder."""
        return f"{self.path}!{self._prefix}{inner}" if self._zip is not None else str(self._root / inner)

    def use_as_is(self, train: FrameworkSet, tests: list[FrameworkSet], wordnet: Path) -> str:
        """The command that runs the WSD table on this copy's own folders (a zip is unpacked beside itself first)."""
        root, unpack = self._root if self._zip is None else None, ""
        if self._zip is not None:
            target = self.path.with_suffix("")
            n = 1
            while target.exists():
                target, n = self.path.with_name(f"{self.path.stem}-{n}"), n + 1
            unpack = shlex.join(["python", "-m", "zipfile", "-e", str(self.path), str(target)]) + " && "
            root = target / self._prefix
        command = ["elmo-tasks", "wsd", "--config", "wsd_semcor", "--train", str(root / train.inner),
                   "--test", *[str(root / s.inner) for s in tests]]
        if wordnet != Path("data", "wordnet-3.0"):
            command += ["--wordnet", str(wordnet)]
        return unpack + shlex.join(command)

    def has(self, inner: str) -> bool:
        if self._zip is not None:
            try:
                self._zip.getinfo(self._prefix + inner)
                return True
            except KeyError:
                return False
        return (self._root / inner).is_file()

    def copy(self, inner: str, dest: Path) -> None:
        """Copy one file out (streamed); a damaged zip member is one WsdFormatError line."""
        if not self.has(inner):
            raise WsdFormatError(f"{self.label(inner)}: missing; the framework has every data set of the manifest "
                                 "(is the zip or folder complete?)")
        try:
            if self._zip is None:
                shutil.copyfile(self._root / inner, dest)
                return
            with self._zip.open(self._prefix + inner) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, OSError, EOFError) as e:
            raise WsdFormatError(f"{self.label(inner)}: cannot be read ({e}); the zip is damaged: delete it and "
                                 "fetch again") from None

    def readme(self) -> tuple[str, str] | None:
        """(file name, text) of the framework's README at its root, if it has one."""
        names = (self._zip.namelist() if self._zip is not None
                 else [p.name for p in self._root.iterdir() if p.is_file()])
        for n in names:
            rel = n[len(self._prefix):] if self._zip is not None else n
            if "/" not in rel and rel.lower().startswith("readme"):
                data = self._zip.read(n) if self._zip is not None else (self._root / rel).read_bytes()
                return rel, data.decode("utf-8", errors="replace")
        return None

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()


def verify_set(fw: Framework, s: FrameworkSet, folder: Path, inventory: SenseInventory) -> dict:
    """Extract one data set into ``folder`` and check it; returns its counts. Any difference: one line naming the
    file as the user gave it and what differs (NotPublished when the set reads whole but is not the release's)."""
    folder.mkdir(parents=True)
    data_member, key_member = s.members()
    fw.copy(data_member, folder / f"{s.name}.data.xml")
    fw.copy(key_member, folder / f"{s.name}.gold.key.txt")
    try:
        ds = load_dataset(folder)  # the XML parses; instance ids and gold keys match one to one
    except ElmoTasksError as e:  # (the reader's and the text policy's words name the temporary copy)
        msg = str(e)
        for path, label in ((folder / f"{s.name}.data.xml", fw.label(data_member)),
                            (folder / f"{s.name}.gold.key.txt", fw.label(key_member)), (folder, fw.label(s.inner))):
            msg = msg.replace(str(path.resolve()), label).replace(str(path), label)
        if fw.is_zip:  # a command on a zip member does not run: the way to one that does
            msg = re.sub(r"\(e\.g\. iconv [^)]*\)", "(unpack the zip, convert that file, e.g. with iconv, and give "
                         "the unpacked folder with --from)", msg)
        raise WsdFormatError(msg) from None
    n = len(ds.instances)
    if n != s.instances:
        raise NotPublished(f"{fw.label(data_member)}: {n:,} instances, but the framework's {s.name} has "
                           f"{s.instances:,}")
    bad = [(iid, k) for iid, keys in ds.gold.items() for k in keys if k not in inventory]
    if bad:
        raise NotPublished(f"{fw.label(key_member)}: {len(bad)} gold key(s) are not WordNet 3.0 sense keys (first: "
                           f"{bad[0][0]} {bad[0][1]}); the framework's keys are all WordNet 3.0")
    pos: dict[str, int] = {}
    for inst in ds.instances:
        pos[inst.pos] = pos.get(inst.pos, 0) + 1
    return {"name": s.name, "instances": n, "sentences": len(ds.sentences), "pos": pos}


def verify_sets(fw: Framework, manifest: tuple[FrameworkSet, ...], out: Path, inventory: SenseInventory,
                wordnet: Path) -> list[dict]:
    """Extract and check every data set of ``manifest`` into ``out/<name>``; returns their counts. One refusal
    (WsdFormatError) names every data set that is missing or differs, the layout expected, and, when this copy
    has a usable training set and test sets, the ``wsd`` command that uses them as they are."""
    sets, problems, usable = [], [], []
    for s in manifest:
        try:
            sets.append(verify_set(fw, s, out / s.name, inventory))
        except NotPublished as e:
            problems.append(str(e))
            usable.append(s)
            continue
        except WsdFormatError as e:
            problems.append(str(e))
            continue
        usable.append(s)
        print(f"{NAME}: {s.name}: {sets[-1]['instances']:,} instances verified", flush=True)
    if not problems:
        return sets
    differ = "is missing or differs" if len(problems) == 1 else "are missing or differ"
    msg = (f"{fw.path}: {len(problems)} of the framework's {len(manifest)} data sets {differ} from the published "
           f"release: {'; '.join(problems)}. The layout expected: {layout(manifest)}")
    train = [s for s in usable if s.inner.startswith("Training_Corpora/")]
    tests = [s for s in usable if s.inner.startswith("Evaluation_Datasets/") and s.name != "ALL"]
    if train and tests:
        msg += f". To use this copy as it is: `{fw.use_as_is(train[0], tests, wordnet)}`"
    raise WsdFormatError(msg)


def _zip_path(from_path: Path | None, progress: bool | None, backoff: float) -> Path:
    """The framework's zip or folder: ``from_path``, else the download (kept in the download cache)."""
    if from_path is not None:
        if not from_path.exists():
            raise MissingPathError(f"--from {from_path}: not found; give the framework's zip or its unpacked folder")
        return from_path
    url = os.environ.get(URL_ENV) or URL
    dest = default_cache_dir() / "downloads" / ZIP_NAME

    def check(path: Path) -> None:
        if not zipfile.is_zipfile(path):
            raise WsdFormatError(f"{url}: the downloaded file is not a zip (an error page?)")

    print(f"{NAME}: downloading {url} (about 165 MB) into {dest} ...", flush=True)
    try:
        return download_url(url, dest, progress=progress, validate=check, backoff=backoff)
    except DownloadError as e:
        raise DownloadError(f"{e} Or fetch the zip elsewhere and give it with `elmo-tasks data get {NAME} --from "
                            "WSD_Evaluation_Framework.zip`") from None


def _source_md(url: str, origin: Path, digest: str | None, sets: list[dict], readme, wordnet: Path, out: Path) -> str:
    lines = [f"# {NAME}: the WSD Evaluation Framework", "",
             "SemCor (training) and the all-words test sets Senseval-2, Senseval-3, SemEval-2007, SemEval-2013 and "
             "SemEval-2015 with their union ALL, every sense a WordNet 3.0 sense key, in the framework's own format "
             "(NAME.data.xml + NAME.gold.key.txt), one folder per data set.", "",
             f"Fetched with `elmo-tasks data get {NAME}` (module `tasks/wsd/data/framework.py`).", "",
             "## Source", "", f"* address: {url}",
             f"* read from: `{origin.name}`" + (f", sha256 `{digest}`" if digest else " (an unpacked folder)"),
             f"* cite: {CITATION}", "",
             "## Verified", "",
             f"Every data set's XML parses, its instance ids and gold keys match one to one, each gold key is a sense "
             f"key of WordNet 3.0 (`{wordnet}`), and its instance count equals the published one.", "",
             "| data set | sentences | instances | nouns | verbs | adjectives | adverbs |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for s in sets:
        p = s["pos"]
        lines.append(f"| {s['name']} | {s['sentences']:,} | {s['instances']:,} | {p.get('NOUN', 0):,} | "
                     f"{p.get('VERB', 0):,} | {p.get('ADJ', 0):,} | {p.get('ADV', 0):,} |")
    lines += ["", "## Terms", ""]
    if readme is not None:
        lines += [f"As stated in the framework's `{readme[0]}` (copied here whole):", "", "```",
                  readme[1].replace("\r\n", "\n").strip(), "```", ""]
    else:
        lines += ["The copy read has no README at its root; see the address above for the framework's terms.", ""]
    lines += ["* SemCor is the Brown Corpus annotated with WordNet senses by Princeton University and is distributed "
              "under the WordNet licence; the Brown Corpus text itself comes from a corpus with its own (LDC) terms: "
              "use it for research.",
              "* WordNet 3.0 licence (Princeton University): use, copy, modify and distribute for any purpose without "
              "fee, keeping the copyright notice" + (" (`LICENSE-WordNet.txt` in this folder)."
                                                     if (out / "LICENSE-WordNet.txt").exists() else "."),
              "* The test sets come from the Senseval/SemEval shared tasks, released for research.", "",
              *files_table(out)]
    return "\n".join(lines) + "\n"


def fetch_framework(dest: str | Path, from_path: str | Path | None = None, force: bool = False,
                    manifest: tuple[FrameworkSet, ...] | None = None, progress: bool | None = None,
                    backoff: float = 1.0) -> Path:
    """Fetch (or take ``from_path``), verify and write the framework's data sets into DEST/wsd/<name>/.

    Skipped when DEST/wsd/SOURCE.md exists, unless ``force`` (a damaged folder is refused); ``force`` replaces only
    what a fetch wrote (tasks/data/fetched.py). WordNet 3.0 must be in DEST/wordnet-3.0 (``data get wordnet-3.0``)
    to check the keys. Nothing is written in place unless every data set passes."""
    manifest = MANIFEST if manifest is None else manifest
    dest = Path(dest)
    final = dest / FOLDER
    if already_fetched(NAME, final, force):  # (a damaged folder is refused, as `data list` shows it)
        return final
    verified = claim(NAME, final, from_path)  # what may be replaced: this, and nothing that appears meanwhile
    try:
        inventory = SenseInventory.from_path(find_index_sense(dest / "wordnet-3.0"))
    except InventoryError:
        raise MissingPathError(f"{NAME}: its gold keys are checked against WordNet 3.0, not found in "
                               f"{dest / 'wordnet-3.0'}; run `elmo-tasks data get wordnet-3.0 {NAME}`") from None
    origin = _zip_path(Path(from_path) if from_path is not None else None, progress, backoff)
    url = os.environ.get(URL_ENV) or URL
    digest = file_sha256(origin) if origin.is_file() else None
    fw = Framework(origin)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix=f".{FOLDER}.", dir=dest) as tmp:
            out = Path(tmp) / FOLDER
            out.mkdir()
            sets = verify_sets(fw, manifest, out, inventory, dest / "wordnet-3.0")
            licence = dest / "wordnet-3.0" / "LICENSE"
            if licence.is_file():
                shutil.copyfile(licence, out / "LICENSE-WordNet.txt")
            readme = fw.readme()
            (out / "SOURCE.md").write_text(_source_md(url if from_path is None else f"{url} (copy given with --from)",
                                                      origin, digest, sets, readme, dest / "wordnet-3.0", out),
                                           encoding="utf-8")
            put_in_place(out, final, Path(tmp) / "previous", verified)  # (previous: removed with tmp)
    finally:
        fw.close()
    print(f"{NAME}: wrote {final} ({', '.join(s.name for s in manifest)})")
    print(f"  source: {url}" + (f" (sha256 {digest[:16]}...)" if digest else ""))
    return final

