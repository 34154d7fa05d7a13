"""The configurations' common base, how plain values become a typed configuration, and the one override syntax of
every trainer's command line.

Every trained model's configuration is a frozen dataclass under ``RunConfig``: the translation kinds of ``kinds``
and chapter 10's language models of ``lm_configs``. ``RunConfig`` holds what ``loop.fit`` reads (the batches'
size, Adam's schedule, the budget); each subclass adds its model's sizes. ``checked`` reads a dict into one and
names the key of any unknown, missing or ill-typed value.

The three command lines (``train``, ``lm_train``, ``mlm_train``) override keys alike: ``--set KEY=VALUE ...``,
each value in JSON (``--set dropout=0 d_ff=512 norm_first=false``). ``add_set`` adds the option to a parser and
``apply_set`` (a dict) or ``overridden`` (a typed configuration) applies it, refusing an unknown key with the
list of valid ones.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import MISSING, dataclass, fields
from typing import Any, TypeVar

__all__ = ["RunConfig", "add_set", "apply_set", "checked", "keys", "overridden", "parse_set"]

C = TypeVar("C")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """What every trained configuration holds: its batches' size, Adam's schedule and the budget."""

    max_tokens: int  # tokens per batch (padding counted)
    peak_lr: float  # the learning rate at the end of the warm-up, then decaying as 1 / sqrt(step)
    warmup: int  # steps of linear warm-up
    seconds: float | None = None  # a budget of training time, or
    steps: int | None = None  # a budget of steps


def keys(schema: type) -> list[str]:
    """Every key a configuration of this dataclass may have, in the order of its fields."""
    return [f.name for f in fields(schema)]


def _is(value: object, annotation: str) -> bool:
    """Is ``value`` of the (string) annotation of a field: 'int', 'float | None', ...? An int is a float too."""
    for option in annotation.split(" | "):
        if option == "None" and value is None:
            return True
        if option == "bool" and isinstance(value, bool):
            return True
        if option == "int" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if option == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if option == "str" and isinstance(value, str):
            return True
    return False


def checked(schema: type[C], values: dict, what: str) -> C:
    """``values`` as the dataclass ``schema``; a ValueError that names the key of an unknown, missing or ill-typed
    value. ``what`` names the configurations in the messages ('transformer', 'masked language model')."""
    by_name = {f.name: f for f in fields(schema)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise ValueError(
            f"not keys of the {what} configurations: {', '.join(unknown)} (its keys: {', '.join(by_name)})"
        )
    for key, value in values.items():
        if not _is(value, str(by_name[key].type)):
            raise ValueError(f"{key} of a {what} configuration must be {by_name[key].type}, got {value!r}")
    missing = [k for k, f in by_name.items() if k not in values and f.default is MISSING]
    if missing:
        raise ValueError(f"a {what} configuration needs {', '.join(missing)}")
    return schema(**values)


# The override syntax -----------------------------------------------------------------------------------------------


def parse_set(text: str) -> tuple[str, Any]:
    """One ``KEY=VALUE`` of ``--set``, the value read as JSON: (key, value). argparse's type for the option."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"the value of {key} must be JSON (a number, true, false or a \"string\"), got {value!r}"
        ) from None


def add_set(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--set KEY=VALUE ...`` to a command line; ``what`` says what it overrides, for the help."""
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        type=parse_set,
        help=f"override keys of {what}, values in JSON (--set dropout=0 d_ff=512 norm_first=true)",
    )


def apply_set(values: dict, pairs: list[tuple[str, Any]], schema: type, what: str) -> dict:
    """``values`` (a configuration as a dict) with ``--set``'s pairs applied, checked against ``schema``.

    A key that is not one of ``schema``'s, or a value of the wrong type, stops the command line with a message that
    names it (and, for a key, lists the valid ones). An integer given for a float key becomes a float (``--set
    dropout=0`` records 0.0), so that a configuration's values keep their types."""
    known = {f.name: str(f.type) for f in fields(schema)}
    out = dict(values)
    for key, value in pairs:
        if key not in known:
            raise SystemExit(f"--set {key}: not a key of the {what} configurations ({', '.join(known)})")
        floats = "float" in known[key].split(" | ") and "int" not in known[key].split(" | ")
        out[key] = float(value) if floats and isinstance(value, int) and not isinstance(value, bool) else value
    try:
        checked(schema, out, what)
    except ValueError as exc:
        raise SystemExit(f"--set: {exc}") from None
    return out


def overridden(config: C, pairs: list[tuple[str, Any]], what: str) -> C:
    """A typed configuration with ``--set``'s pairs applied (``apply_set``): a new one of the same type."""
    values = {f.name: getattr(config, f.name) for f in fields(config)}  # type: ignore[arg-type]
    return type(config)(**apply_set(values, pairs, type(config), what))
