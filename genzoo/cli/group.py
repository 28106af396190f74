"""The ``genzoo`` command group: every GenzooError becomes click's one-line ``Error: ...`` and status 1."""

from __future__ import annotations

import shlex
import sys

import click

from ..errors import ArgumentError, GenzooError

_ARGV: list[str] = []


def command_line() -> str:
    """The current invocation as a shell command (``genzoo fit ...``), for provenance records."""
    return "genzoo " + " ".join(shlex.quote(a) for a in _ARGV)


class GenzooGroup(click.Group):
    """Turns GenzooError into one line; an ArgumentError names the command-line flag, not the Python keyword."""

    def main(self, args=None, *rest, **kwargs):
        _ARGV[:] = list(sys.argv[1:] if args is None else args)
        return super().main(args, *rest, **kwargs)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ArgumentError as exc:
            raise click.ClickException(exc.for_flag(_flag(ctx, exc.argument))) from None
        except GenzooError as exc:
            raise click.ClickException(str(exc)) from None


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
