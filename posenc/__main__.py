"""``python -m posenc check config.json``, and the ``posenc`` console script: :func:`posenc.check_config` in a shell.

Exit status 0 when the configuration was read (whatever it warns about), 2 when it was refused or could not be
read, with the reason on stderr, and 2 for a command line argparse refuses.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from posenc.check import check_config

__all__ = ["main"]

_DESCRIPTION = (
    "Say what each layer of a transformers model does with positions, read from its config.json as "
    "transformers 5.23 reads it: which layers rotate, the base, the scaling, the rotated features, the pair "
    "layout, the axes, the attention factor and the query multiplier; the defaults the configuration class "
    "fills in; and warnings for the pitfalls the posenc book documents."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="posenc", description="posenc's command line.")
    commands = parser.add_subparsers(dest="command", metavar="command")
    check = commands.add_parser("check", help="what a config.json does with positions", description=_DESCRIPTION)
    check.add_argument("config", help="a config.json, or a model directory that holds one")
    check.add_argument(
        "--context",
        type=int,
        metavar="N",
        help="check the base and scaling against Xu et al.'s condition at N positions (chapter 12), and N "
        "against the declared context and the length the scaling was made for",
    )
    check.add_argument("--json", action="store_true", help="print the report as JSON (schema posenc.check/1)")
    check.add_argument("--model-type", metavar="TYPE", help="read the config as this model_type")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (``sys.argv[1:]`` when None); return the exit status."""
    parser = _parser()
    arguments = parser.parse_args(argv)
    if arguments.command != "check":
        parser.print_help(sys.stderr)
        return 2
    try:
        report = check_config(arguments.config, context=arguments.context, model_type=arguments.model_type)
    except (ValueError, TypeError) as refusal:
        print(f"posenc check: refused: {refusal}", file=sys.stderr)
        return 2
    print(report.to_json() if arguments.json else report.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
