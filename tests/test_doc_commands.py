"""Every command in README.md and docs/ (not docs/lab/) runs as written, in a temporary folder.

A page's commands run in order in one folder, as a reader typing them would (a later command reads
what an earlier one wrote), through the command line in-process, `python -c` lines in a subprocess.
The default suite runs each page's commands up to the first that needs data or trains; the slow
suite runs every command, with the data root found as the CLI finds it ($GENZOO_DATA_ROOT, else
../shared/data), at the reduced size a page's note states. A command a page marks as not run (a
Hub push, a training of hours) is left out, with the reason the page gives; tests/doc_commands.py
says how commands and notes are read.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import data_root
from doc_commands import Command, commands, every_command

from genzoo.cli import cli
from genzoo.datasets import DATA_ROOT_ENV

ALL = every_command()
BY_PAGE = {page: [c for c in ALL if c.page == page] for page in dict.fromkeys(c.page for c in ALL)}
# Pages whose commands still lack the notes the test suite reads. Each entry fails its tests on purpose
# (strict xfail): when the page is fixed, the tests pass and the entry must go.
NOTES_PENDING: dict[str, str] = {}


def cheap_prefix(page_commands: list[Command]) -> list[Command]:
    """The commands up to the first that needs data or trains (those run in seconds, with no data)."""
    first = next((i for i, c in enumerate(page_commands) if c.needs_data()), len(page_commands))
    return page_commands[:first]


def run(command: Command, folder, root: str) -> None:
    """Run one command in ``folder`` (the current directory) as a reader's copy would run: the data root only where
    the line states it (``--data-root DIR``, ``npz:DIR/...``, ``GENZOO_DATA_ROOT=``), never from the suite's own
    environment, so a line that leaves it out fails here as it fails for a reader."""
    env, argv = command.words(root)
    if argv[0] in ("python", "python3"):
        outer = {key: value for key, value in os.environ.items() if key != DATA_ROOT_ENV}
        done = subprocess.run([sys.executable, *argv[1:]], cwd=folder, capture_output=True, text=True,
                              env={**outer, **env}, timeout=300)
        assert done.returncode == 0, (command.where, command.text, done.stderr[-2000:])
        return
    result = CliRunner().invoke(cli, argv[1:], env={DATA_ROOT_ENV: None, **env})
    assert result.exit_code == 0, f"{command.where}: {shlex.join(argv)}\n{result.output[-3000:]}"


class PageRun:
    """A page's folder and how many of its commands have run there, in order."""

    def __init__(self, folder):
        self.folder, self.done = folder, 0

    def up_to(self, page_commands: list[Command], last: int, root: str) -> None:
        """Run the commands before and at ``last`` that have not run yet (a later one reads what they wrote)."""
        if self.done == 0:
            assert not any(self.folder.iterdir()), "a page's commands start in a fresh, empty folder"
        while self.done <= last:
            command = page_commands[self.done]
            self.done += 1
            if not command.skip:
                run(command, self.folder, root)


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory):
    runs: dict[str, PageRun] = {}

    def get(page: str) -> PageRun:
        if page not in runs:
            runs[page] = PageRun(tmp_path_factory.mktemp(page.replace("/", "-")))
        return runs[page]

    return get


def test_the_pages_hold_the_commands_a_reader_copies():
    assert {"README.md", "docs/cli.md", "docs/hub.md", "docs/plugins.md", "docs/models.md"} <= set(BY_PAGE)
    assert len(ALL) >= 60
    readme = [c.text for c in BY_PAGE["README.md"]]
    assert "genzoo list" in readme and any(t.startswith("genzoo refine ign --input noisy_digits.npz") for t in readme)
    assert not [c for c in ALL if "docs/lab/" in c.page]


def pending(page: str) -> list:
    """The marks of a page whose notes are not written yet: its tests are expected to fail until they are."""
    if page not in NOTES_PENDING:
        return []
    return [pytest.mark.xfail(strict=True, reason=NOTES_PENDING[page])]


@pytest.mark.parametrize("page", [pytest.param(page, marks=pending(page)) for page in BY_PAGE])
def test_every_command_runs_as_written_or_its_page_says_why_not(page):
    """A command with a word the reader must replace (ORG/NAME, MODEL, ...) is marked, or it is no example."""
    unmarked = [f"{c.where}: {c.text} (replace {', '.join(c.placeholders())})" for c in BY_PAGE[page]
                if not c.skip and c.placeholders()]
    assert not unmarked, "write a command that runs, or mark it as not run with the reason:\n" + "\n".join(unmarked)
    for command in BY_PAGE[page]:
        assert not command.skip or len(command.skip) > 10, f"{command.where}: say why it is not run"
        assert len(command.reduced) % 2 == 0, f"{command.where}: the note's options come as OPTION VALUE pairs"


def test_the_notes_are_read_as_a_reader_reads_them(tmp_path):
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text("Intro.\n\n"
                    "    genzoo list   # the catalogue\n"
                    "    genzoo eval ign -n 10000 --data-root DIR   # score it (the test suite runs it with -n 50)\n"
                    "    genzoo push runs/x org/x   # (not run by the test suite: it needs the Hub)\n\n"
                    "File: README.md\n\n```markdown\n    genzoo not-a-command\n```\n\n"
                    "```bash\n# (not run by the test suite: a training of hours)\ngenzoo fit ign --steps 9\n```\n\n"
                    "<!-- (the test suite runs these with --steps 2) -->\n```bash\ngenzoo fit ign --steps 9 \\\n"
                    "    --out runs/a\n```\n")
    found = commands(page, root=tmp_path)
    assert [c.text for c in found] == ["genzoo list", "genzoo eval ign -n 10000 --data-root DIR",
                                       "genzoo push runs/x org/x", "genzoo fit ign --steps 9",
                                       "genzoo fit ign --steps 9 --out runs/a"]
    listing, score, push, long, reduced = found
    assert not listing.skip and not listing.needs_data() and score.needs_data()
    assert score.words("/data")[1] == ["genzoo", "eval", "ign", "-n", "50", "--data-root", "/data"]
    assert push.skip == "it needs the Hub" and long.skip == "a training of hours"
    assert reduced.words("/data")[1] == ["genzoo", "fit", "ign", "--steps", "2", "--out", "runs/a"]


def test_a_command_that_needs_data_states_where_it_is():
    """A reader's folder has no ./data and no GENZOO_DATA_ROOT: the line itself must say --data-root DIR."""
    from genzoo.plugins import get_host

    def trains_without_data(command: Command) -> bool:
        words = shlex.split(command.text)
        method = words[words.index("fit") + 1] if "fit" in words[:-1] else ""
        return get_host().has_method(method) and not get_host().method(method).needs_data

    silent = [f"{c.where}: {c.text}" for c in ALL if not c.skip and c.needs_data() and not c.states_data_root()
              and not trains_without_data(c)]
    assert not silent, "add --data-root DIR (the reader's data folder) to:\n" + "\n".join(silent)


def test_no_two_commands_the_suite_runs_write_the_same_run_export_or_staging_folder():
    """A reader who copies the examples of several pages into one folder meets no "already holds a run" or "is not
    an empty folder" from an example of another page."""
    writers: dict[str, list[str]] = {}
    for command in ALL:
        if not command.skip:
            for path in command.creates():
                writers.setdefault(path, []).append(command.where)
    assert not {path: where for path, where in writers.items() if len(where) > 1}
    readme = {path for c in BY_PAGE["README.md"] for path in c.creates()}
    assert "runs/ign" in readme and "genzoo-vae" in readme  # what is read: fit's --out, new-plugin's folder


CHEAP = [(page, i) for page, found in BY_PAGE.items() for i in range(len(cheap_prefix(found)))]


@pytest.mark.parametrize("page, index", CHEAP, ids=[f"{page}:{BY_PAGE[page][i].line}" for page, i in CHEAP])
def test_a_command_that_needs_no_data_runs_as_written(page, index, page_runs, monkeypatch):
    """One test per command, in the page's order in the page's folder (the commands before it run first)."""
    state = page_runs(page)
    monkeypatch.chdir(state.folder)
    state.up_to(BY_PAGE[page], index, str(data_root()))
    assert state.done > index


@pytest.mark.slow
@pytest.mark.parametrize("page", [pytest.param(page, marks=pending(page)) for page in BY_PAGE])
def test_every_command_of_a_page_runs_with_the_data(page, tmp_path, monkeypatch):
    root = data_root()
    if not (root / "MNIST" / "raw" / "t10k-images-idx3-ubyte").is_file():
        pytest.skip(f"no data under {root} ($GENZOO_DATA_ROOT or ../shared/data); the default suite runs the "
                    f"commands that need none")
    found = BY_PAGE[page]
    if all(c.skip for c in found):
        pytest.skip(f"{page} marks every command as not run: {found[0].skip}")
    monkeypatch.chdir(tmp_path)
    PageRun(tmp_path).up_to(found, len(found) - 1, str(root))
