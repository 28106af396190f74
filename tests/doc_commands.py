"""The `genzoo ...` lines of README.md and docs/ (not docs/lab/), read as a reader would copy them.

A command is a line of a code block (fenced, or indented by four spaces) that starts with `genzoo`
(after environment assignments such as `HF_HUB_OFFLINE=1`); a line ending in a backslash goes on.
`python -c ...` lines of the same blocks are kept too: they make the files the next commands read.
Blocks that hold a file's contents (after a `File: PATH` line), Python, YAML or JSON are not commands.

A page says how the test suite treats a command, in a note the reader sees:

- `# ... (not run by the test suite: REASON)` after the command, or on a comment line of its
  block (then for every command after it in the block): the suite leaves it out, saying REASON;
- `# ... (the test suite runs it with ARGS)` (or `runs these with`): the suite runs it with ARGS in
  place of the same options (a smaller `-n` or `--steps`);
- the same notes in an HTML comment before a block (`<!-- (not run by the test suite: ...) -->`)
  apply to the whole block.

`DIR` (and `DATA`) as the value of `--data-root`, or in `npz:DIR/...`, is the data root.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_RUN = re.compile(r"\(not run by the test suite: ([^)]*)\)")
REDUCED = re.compile(r"\(the test suite runs (?:it|these) with ([^)]*)\)")
PLACEHOLDERS = ("DIR", "DATA")
DATA_FREE_SPECS = ("npz:", "folder:")
SHELL_FENCES = ("", "bash", "sh", "shell", "console", "text")


@dataclass
class Command:
    page: str
    line: int
    text: str  # as written, without its comment
    note: str = ""  # the comment after it, if any
    skip: str = ""  # why the suite leaves it out ("" to run it)
    reduced: list[str] = field(default_factory=list)  # options the suite runs it with instead

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def words(self, data_root: str) -> tuple[dict[str, str], list[str]]:
        """(environment assignments, argv) with the data root in place of DIR and the reduced options applied."""
        words = shlex.split(self.text)
        env = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        words = [_data_root(word, previous, data_root) for previous, word in zip([""] + words, words)]
        return env, with_options(words, self.reduced)

    def needs_data(self) -> bool:
        """Whether it reads a dataset (a data root, a named dataset or reference) or trains: the slow suite's."""
        words = shlex.split(self.text)
        verb = next((w for w in words if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", w) and w != "genzoo"), "")
        if words[0].startswith("python"):
            return False
        values = {flag: words[i + 1] for i, flag in enumerate(words[:-1]) if flag in ("--dataset", "--ref")}
        named_data = any(not value.startswith(DATA_FREE_SPECS) for value in values.values())
        return verb in ("fit", "eval") or "--data-root" in words or named_data

    def states_data_root(self) -> bool:
        """Whether a reader's copy finds the data: ``--data-root`` or ``GENZOO_DATA_ROOT=`` on the line itself."""
        env, words = self.words("DIR")
        return "--data-root" in words or "GENZOO_DATA_ROOT" in env

    def creates(self) -> list[str]:
        """The paths it makes that a second writer would be refused (a run's --out, an export's DEST, a staged push,
        a new plugin's folder), without a trailing slash; a --resume continues its --out instead."""
        words = shlex.split(self.text)
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            words.pop(0)
        if words[:1] != ["genzoo"] or len(words) < 2:
            return []
        verb, rest = words[1], words[2:]
        positional = [w for i, w in enumerate(rest) if not w.startswith("-") and (i == 0 or not rest[i - 1].startswith("-"))]
        made = []
        if verb == "fit" and "--out" in rest[:-1] and "--resume" not in rest:
            made.append(rest[rest.index("--out") + 1])
        if verb == "push" and "--dry-run" in rest:
            after = rest[rest.index("--dry-run") + 1:]
            made.append(after[0] if after and not after[0].startswith("-") else "staged")
        if verb == "export" and len(positional) >= 2:
            made.append(positional[1])
        if verb == "new-plugin" and positional:
            made.append(positional[1] if len(positional) > 1 else f"genzoo-{positional[0]}")
        return [path.rstrip("/") for path in made]

    def placeholders(self) -> list[str]:
        """Words a reader would have to replace (ORG/NAME, MODEL, RUN, ...) other than the data root."""
        words = shlex.split(self.text)
        found = [w for w in words if w not in PLACEHOLDERS and (re.fullmatch(r"[A-Z]{3,}(/[A-Z]+)?", w)
                                                              or "..." in w or w.startswith("<"))]
        return found


def _data_root(word: str, previous: str, data_root: str) -> str:
    if previous == "--data-root" and word in PLACEHOLDERS:
        return data_root
    for placeholder in PLACEHOLDERS:
        if f":{placeholder}/" in word:
            return word.replace(f":{placeholder}/", f":{data_root}/")
    return word


def with_options(words: list[str], options: list[str]) -> list[str]:
    """``words`` with each option of ``options`` (``-n 500``, ``--steps 2``) that they hold set to the value given."""
    words = list(words)
    for flag, value in zip(options[::2], options[1::2]):
        if flag in words[:-1]:
            words[words.index(flag) + 1] = value
    return words


def pages() -> list[Path]:
    docs = [p for p in sorted((ROOT / "docs").rglob("*.md")) if "lab" not in p.relative_to(ROOT / "docs").parts]
    return [ROOT / "README.md", *docs]


def blocks(text: str) -> list[tuple[int, list[str], str]]:
    """(line number of the first line, lines, the note before it) of each shell code block of a page."""
    lines = text.splitlines()
    found = []
    i = 0
    note = ""
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"\s*```(\w*)", line)
        if fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```")), len(lines))
            after_file = i >= 2 and lines[i - 2].startswith("File: ")
            if fence.group(1) in SHELL_FENCES and not after_file:
                found.append((i + 2, lines[i + 1:end], note))
            i, note = end + 1, ""
            continue
        if line.startswith("    ") and (i == 0 or not lines[i - 1].strip()) and not _in_list(lines, i):
            end = i
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            found.append((i + 1, lines[i:end], note))
            i, note = end, ""
            continue
        comment = re.match(r"\s*<!--(.*?)-->", line)
        if comment:
            note = comment.group(1)
        elif line.strip():
            note = ""
        i += 1
    return found


def _in_list(lines: list[str], i: int) -> bool:
    """Whether the indented line ``i`` continues a list item (then it is text, not code)."""
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return j >= 0 and bool(re.match(r"\s*([-*]|\d+\.)\s", lines[j])) and not lines[j].startswith("    ")


def commands(page: Path, root: Path = ROOT) -> list[Command]:
    """Every command of ``page`` (named relative to ``root``), in order, with what its notes say."""
    found = []
    relative = str(page.relative_to(root))
    for first, lines, block_note in blocks(page.read_text(encoding="utf-8")):
        block_skip, block_reduced = _notes(block_note)
        joined: list[tuple[int, str]] = []
        for offset, line in enumerate(lines):
            if joined and joined[-1][1].endswith("\\"):
                joined[-1] = (joined[-1][0], joined[-1][1][:-1].rstrip() + " " + line.strip())
            else:
                joined.append((first + offset, line.strip()))
        continuing = None  # the command whose note comment lines right below it go on with
        for number, line in joined:
            if line.startswith("#"):
                skip, reduced = _notes(line)
                if continuing is not None:
                    continuing.note += " " + line.lstrip("# ")
                    continuing.skip, continuing.reduced = skip or continuing.skip, reduced or continuing.reduced
                else:  # a note for the rest of the block
                    block_skip, block_reduced = skip or block_skip, reduced or block_reduced
                continue
            text, note = _split_comment(line)
            continuing = None
            if not _is_command(text):
                continue
            skip, reduced = _notes(note)
            found.append(Command(relative, number, text, note, skip or block_skip, reduced or block_reduced))
            continuing = found[-1]
    return found


def _is_command(text: str) -> bool:
    words = text.split()
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words.pop(0)
    return bool(words) and (words[0] == "genzoo" or (words[0] in ("python", "python3") and words[1:2] == ["-c"]))


def _split_comment(line: str) -> tuple[str, str]:
    """The command and its trailing `# ...` comment (a # inside quotes is not one)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line, ""


def _notes(text: str) -> tuple[str, list[str]]:
    skip = NOT_RUN.search(text or "")
    reduced = REDUCED.search(text or "")
    return (skip.group(1).strip() if skip else ""), (shlex.split(reduced.group(1)) if reduced else [])


def every_command() -> list[Command]:
    return [command for page in pages() for command in commands(page)]
