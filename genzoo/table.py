"""One table type and one row type for everything plugins register: methods, models, datasets, metrics,
feature networks.

A row is an :class:`Entry`: a ``name``, a ``source`` (who registered it: "genzoo", "registry.yaml",
"plugin 'NAME'") and, if it has other names, ``aliases``; each kind of row is a dataclass that
subclasses it (:mod:`genzoo.entries`, and the catalogue's :class:`genzoo.registry.ModelEntry`). A
table refuses a name it already holds, naming both sources, and finds a row by name or alias
whatever the case; a name it does not know gets one error of the same shape for every kind, with
the closest known name when one is close.
"""

from __future__ import annotations

import difflib
from typing import Generic, Iterable, Iterator, Sequence, TypeVar

from .errors import GenzooError


class Entry:
    """A row of a :class:`Table`; the kinds of row are dataclasses that subclass it and declare these fields."""

    name: str
    source: str
    aliases: Sequence[str] = ()

    def names(self) -> tuple[str, ...]:
        """Its name and its aliases."""
        return (self.name, *self.aliases)


R = TypeVar("R", bound=Entry)


class Table(dict, Generic[R]):
    """Rows by name, for one ``kind`` ("method", "dataset", ...).

    It is a dict of canonical name to row, so code that only reads it reads a dict. ``hint`` ends
    every "unknown name" error: what to pass instead, or where to look.
    """

    def __init__(self, kind: str, *, hint: str, plural: str | None = None):
        super().__init__()
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self.hint = hint

    def names(self) -> Iterator[str]:
        """Every name and alias the table answers to."""
        for row in self.values():
            yield from row.names()

    def find(self, name: str) -> R | None:
        """The row called ``name`` or one of its aliases, in any case; None if there is none."""
        if name in self:
            return self[name]
        wanted = name.lower()
        return next((row for row in self.values() if wanted in (n.lower() for n in row.names())), None)

    def add(self, row: R) -> None:
        """Add ``row``, refusing any of its names that another row holds."""
        self.check_free(row)
        self[row.name] = row

    def check_free(self, row: R) -> None:
        """Raise if a name or alias of ``row`` is taken, naming who took it."""
        for name in row.names():
            other = self.find(name)
            if other is not None and other is not row:
                raise GenzooError(f"{self.kind} name {name!r} from {row.source} is already registered by "
                                  f"{other.source}")

    def lookup(self, name: str, *, also: Iterable[str] = (), note: str = "") -> R:
        """The row called ``name`` (any case, or an alias), else :meth:`unknown`."""
        row = self.find(name)
        if row is None:
            raise self.unknown(name, also=also, note=note)
        return row

    def unknown(self, name: str, *, also: Iterable[str] = (), note: str = "") -> GenzooError:
        """The error for a name this table lacks: the name, the closest known one, every known one, the hint.

        ``also`` are other names a lookup accepts (a method's name finds its model), so they may be
        suggested; ``note`` is a sentence that explains the miss better than a guess can.
        """
        guess = closest_name(name, [*self.names(), *also])
        known = ", ".join(sorted(self)) or "none"
        return GenzooError(f"unknown {self.kind} {name!r}" + (f"; {note}" if note else "")
                           + (f"; did you mean {guess}?" if guess and not note else "")
                           + f" (known {self.plural}: {known}); {self.hint}")


def closest_name(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate a misspelt ``name`` most likely meant, compared without case; None if none is close."""
    by_lower = {c.lower(): c for c in sorted(set(candidates))}
    matches = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[matches[0]] if matches else None
