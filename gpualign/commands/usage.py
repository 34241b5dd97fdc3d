"""The subcommands' help in the conventional plain form: `Usage: gpualign pairs [OPTIONS] QUERY TARGET`,
arguments by their upper-case names, each option with a metavar (`-o, --output FILE`, `-t, --threads INT`),
as argparse and click write them, instead of Typer's `{query}` and `<str>`."""

from __future__ import annotations

from typer.core import TyperCommand

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}  # the app's context settings: -h on every command
# metavars other than the option's long name in upper case (text) or its type (numbers)
METAVARS = {"output": "FILE", "summary": "FILE", "fmt": "FORMAT", "scheduler": "ADDRESS", "gpus": "N",
            "unknown": "CHAR", "query_record": "NAME", "target_record": "NAME", "verify": "FRACTION",
            "cpu_method": "METHOD", "cpu_workers": "N"}
# by type name: Typer's own core (bare_type(): int, float) or click's ParamType.name (integer, float),
# as Typer releases built on click give it
TYPE_METAVARS = {"int": "INT", "integer": "INT", "float": "FLOAT"}


def metavar(param) -> str:
    """An option's or argument's metavar: METAVARS, else INT/FLOAT by type, else the name in upper case."""
    if param.name in METAVARS:
        return METAVARS[param.name]
    kind = param.bare_type() if hasattr(param, "bare_type") else getattr(getattr(param, "type", None), "name", "")
    if param.param_type_name == "option" and kind in TYPE_METAVARS:
        return TYPE_METAVARS[kind]
    long = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return (long[0][2:] if long else param.name).replace("-", "_").upper()


class PlainCommand(TyperCommand):
    """A Typer command whose usage line names its arguments (QUERY TARGET) and whose options show a
    metavar (FILE, INT, MODE); flags show none."""

    def __init__(self, *args, **kwargs):
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

    def format_options(self, ctx, formatter) -> None:
        args = [(p.metavar, p.help or "") for p in self._params(ctx, "argument") if not p.hidden]
        opts = [r for p in self._params(ctx, "option") if (r := p.get_help_record(ctx))]
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
