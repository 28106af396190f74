"""Progress bars: shown only when asked for and when they go to a terminal, so logs and pipes stay clean."""

from __future__ import annotations

from typing import Any, Iterable, TypeVar

T = TypeVar("T")


def progress_bar(iterable: Iterable[T], shown: bool, **kwargs: Any) -> Iterable[T]:
    """``iterable`` wrapped in a tqdm bar that is off unless ``shown`` and stderr is a terminal.

    (tqdm's ``disable=None`` is its own test for a terminal.) Keyword arguments go to tqdm.
    """
    from tqdm.auto import tqdm

    return tqdm(iterable, disable=None if shown else True, dynamic_ncols=True, **kwargs)
