"""The ``genzoo`` command group: verbs imported only when they run, and every GenzooError as one ``Error:`` line.

A verb's module is imported when that verb runs or shows its help, so ``genzoo --help`` imports
none of them (and no torch), and ``genzoo sample`` imports no training code. Plugins' verbs are
found by loading the plugins when a name is not a verb of genzoo's own.
"""

from __future__ import annotations

import importlib
import shlex
import sys
import warnings
from dataclasses import dataclass

import click

from ..errors import ArgumentError, GenzooError
from ..table import closest_name

_ARGV: list[str] = []


def command_line() -> str:
    """The current invocation as a shell command (``genzoo fit ...``), for provenance records."""
    return "genzoo " + " ".join(shlex.quote(a) for a in _ARGV)


class GenzooGroup(click.Group):
    """Turns GenzooError into one line; an ArgumentError names the command-line flag, not the Python keyword."""

    def main(self, args=None, *rest, **kwargs):
        _ARGV[:] = list(sys.argv[1:] if args is None else args)
        return super().main(args, *rest, **kwargs)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:  # a mistake in genzoo's own options (`genzoo --bogus`)
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context):
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _one_line_warning
                return super().invoke(ctx)
        except ArgumentError as exc:
            raise click.ClickException(exc.for_flag(_flag(ctx, exc.argument))) from None
        except GenzooError as exc:
            raise click.ClickException(str(exc)) from None
        except click.UsageError as exc:
            raise _one_line(exc) from None
        except KeyboardInterrupt:
            verb = ctx.invoked_subcommand or ""
            click.echo(f"\nInterrupted: genzoo {verb} stopped before it finished; {KEPT.get(verb, KEPT_DEFAULT)}",
                       err=True)
            sys.exit(130)  # 128 + SIGINT, as a shell reports it


# What is left of a verb's work when Ctrl-C stops it (`genzoo fit` says it itself: the checkpoint it saved).
KEPT_DEFAULT = "nothing was written (genzoo writes each output whole at the end, or not at all)"
KEPT = {
    "pull": "the files it had downloaded stay in the Hugging Face cache; the same command goes on from there",
    "push": "nothing was uploaded unless its one commit had been sent; the same command again is safe (unchanged "
            "files make no new commit)",
}


def _one_line(exc: click.UsageError) -> click.ClickException:
    """A usage mistake (a bad value, a missing argument, an unknown option or verb) as genzoo's one ``Error:`` line,
    exit status 1, naming the help that lists what is accepted, instead of click's usage block and status 2."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):  # `genzoo` alone: its help, as click shows it
        raise exc
    where = exc.ctx.command_path if exc.ctx is not None else "genzoo"
    return click.ClickException(" ".join(f"{exc.format_message()} (see `{where} --help`)".split()))


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line on stderr (``Warning: ...``), without Python's source line: the user ran a command."""
    kind = "" if issubclass(category, UserWarning) else f" ({category.__name__})"
    text = " ".join(str(message).split())
    click.echo(f"Warning{kind}: {text}", err=True)


def _flag(ctx: click.Context, argument: str) -> str:
    """The flag of the option whose Python name is ``argument`` in the command being run."""
    commands = [ctx.command.get_command(ctx, ctx.invoked_subcommand)] if ctx.invoked_subcommand else []
    while commands:
        command = commands.pop(0)
        if command is None:
            continue
        for param in command.params:
            if param.name == argument and isinstance(param, click.Option):
                return param.opts[0]
        if isinstance(command, click.Group):
            commands.extend(command.commands.values())
    return "--" + argument.replace("_", "-")


@dataclass(frozen=True)
class Verb:
    """A verb of genzoo's own: the module under ``genzoo.cli`` that defines its ``command``, and its one-line help."""

    module: str
    summary: str  # the first line of the command's docstring (a test keeps them equal)

    def stand_in(self, name: str) -> click.Command:
        """A command that only has the help line, to show in ``genzoo --help`` without importing the verb."""
        return click.Command(name, help=self.summary)


class LazyGroup(GenzooGroup):
    """A group of ``verbs`` imported on use, plus the commands added to it and those of the loaded plugins."""

    def __init__(self, *args, verbs: dict[str, Verb], **kwargs):
        super().__init__(*args, **kwargs)
        self.verbs = verbs
        self._plugin_commands: dict[str, click.Command] = {}
        self._plugins_of: object = None  # the plugin host those commands came from

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.verbs, *self.commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands:
            return self.commands[name]
        if name in self.verbs:
            return importlib.import_module(f"{__package__}.{self.verbs[name].module}").command
        return self.plugin_commands(ctx).get(name)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """As click's, and a verb that does not exist gets the closest one suggested."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            guess = closest_name(args[0], [*self.list_commands(ctx), *self.plugin_commands(ctx)]) if args else None
            if guess is None or not exc.message.startswith("No such command"):
                raise
            raise click.UsageError(f"{exc.message} Did you mean {guess!r}?", ctx) from None

    def plugin_commands(self, ctx: click.Context) -> dict[str, click.Command]:
        """The commands the loaded plugins add (``register_commands``), asked for once per plugin host."""
        from ..plugins import get_host

        host = get_host()
        if self._plugins_of is not host:
            own = click.Group()
            host.add_commands(own, reserved=self.list_commands(ctx))
            self._plugin_commands, self._plugins_of = dict(own.commands), host
        return self._plugin_commands

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The verbs with their one-line help, from the table (no verb module is imported)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = [(name, self.verbs[name].stand_in(name) if name in self.verbs else self.commands[name])
                for name in names]
        rows = [(name, command.get_short_help_str(limit)) for name, command in rows]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
