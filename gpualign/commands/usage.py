"""The command line's plumbing on click: help in the conventional plain form (`Usage: gpualign pairs
[OPTIONS] QUERY TARGET`, arguments by their upper-case names with a line of help each, each option with a
metavar: `-o, --output FILE`, `-t, --threads INT`), commands listed in the order they were added, and
defaults shown where an option has one."""

from __future__ import annotations

import click

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}  # -h on every command
SETTINGS = {**HELP_OPTIONS, "show_default": True}  # a subcommand's: [default: X] beside an option that has one
# metavars other than the option's long name in upper case (text) or its type (numbers)
METAVARS = {"output": "FILE", "summary": "FILE", "fmt": "FORMAT", "scheduler": "ADDRESS", "gpus": "GPUS",
            "unknown": "CHAR", "query_record": "NAME", "target_record": "NAME", "verify": "FRACTION",
            "cpu_method": "METHOD", "cpu_workers": "N", "directory": "DIR"}
TYPE_METAVARS = {"integer": "INT", "integer range": "INT", "float": "FLOAT"}  # by click's ParamType.name


def metavar(param) -> str:
    """An option's or argument's metavar: METAVARS, else INT/FLOAT by type, else the name in upper case."""
    if param.name in METAVARS:
        return METAVARS[param.name]
    if param.param_type_name == "option" and param.type.name in TYPE_METAVARS:
        return TYPE_METAVARS[param.type.name]
    long = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return (long[0][2:] if long else param.name).replace("-", "_").upper()


class Argument(click.Argument):
    """A positional argument with a line of help (click's own take none)."""

    def __init__(self, *args, help: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.help = help


def argument(name: str, help: str):
    """A required positional argument, QUERY in the usage line, with its help."""
    return click.argument(name, cls=Argument, help=help)


class PlainCommand(click.Command):
    """A command whose usage line names its arguments (QUERY TARGET), whose options show a metavar (FILE,
    INT, MODE; flags none), with an Arguments section above the Options."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("context_settings", SETTINGS)
        super().__init__(*args, **kwargs)
        for p in self.params:
            if p.metavar is None and not getattr(p, "is_flag", False):
                p.metavar = metavar(p)

    def _params(self, ctx, kind: str) -> list:
        """The command's parameters of one kind: "argument" or "option"."""
        return [p for p in self.get_params(ctx) if p.param_type_name == kind]

    def collect_usage_pieces(self, ctx) -> list[str]:
        args = self._params(ctx, "argument")
        return [self.options_metavar, *(p.metavar if p.required else f"[{p.metavar}]" for p in args)]

    def format_arguments(self, ctx, formatter) -> None:
        """Nothing: format_options writes the arguments (click 8.5's own section, "Positional arguments",
        would repeat them; earlier releases have none)."""

    def format_options(self, ctx, formatter) -> None:
        args = [(p.metavar, p.help or "") for p in self._params(ctx, "argument") if not getattr(p, "hidden", False)]
        opts = [r for p in self._params(ctx, "option") if (r := p.get_help_record(ctx))]
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class Group(click.Group):
    """A group that lists its commands in the order they were added, and shows its help when called bare."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("context_settings", HELP_OPTIONS)
        super().__init__(*args, no_args_is_help=True, **kwargs)

    def list_commands(self, ctx) -> list[str]:
        return list(self.commands)


def command(group: Group, name: str, short_help: str | None = None, epilog: str | None = None):
    """Register the decorated function as a PlainCommand of group."""
    return group.command(name=name, cls=PlainCommand, short_help=short_help, epilog=epilog)
