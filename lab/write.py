"""A `Spec` value written back as the four TOML files a spec folder holds, so a spec made in Python can be named by `--spec`.

A mutant or an edited proposal is a value (`spec.edits`); the explorer and
every replay command name a spec by a folder. `write_spec` writes the value's
machines, failure domains and invariants in the loader's format, so that
`load_spec(folder)` gives back a spec with the same digest (comments and
layout are not kept: the digest leaves them out too). It refuses to write
into a folder that already holds a different spec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomli_w

from shiftchange.spec.loader import FILES
from shiftchange.spec.model import Machine, Spec

__all__ = ["SpecWriteError", "spec_files", "write_spec"]


class SpecWriteError(OSError):
    """The spec cannot be written where it was asked to be: one line saying why."""


def _machine(machine: Machine) -> dict[str, Any]:
    header: dict[str, Any] = {"name": machine.name, "initial": machine.initial, "description": machine.description}
    if machine.roles:
        header["roles"] = dict(machine.roles)
    states = {}
    for state in machine.states.values():
        body: dict[str, Any] = {"description": state.description}
        body.update({flag: True for flag in ("terminal", "dispatchable", "resting") if getattr(state, flag)})
        states[state.name] = body
    document: dict[str, Any] = {"machine": header, "states": states}
    for kind in ("triggers", "guards", "effects"):
        terms = {}
        for term in getattr(machine, kind).values():
            terms[term.name] = {"description": term.description} | ({"material": True} if term.material else {})
        if terms:
            document[kind] = terms
    rows = []
    for row in machine.rows:
        body = {"trigger": row.trigger, "source": list(row.sources), "dest": row.dest, "actor": row.actor}
        body |= {"guards": list(row.guards), "effects": list(row.effects), "fenced": row.fenced}
        rows.append(body)
    document["transition"] = rows
    return document


def spec_files(spec: Spec) -> dict[str, str]:
    """The text of each of the spec's files, by file name (attempt.toml, task.toml, failure_domains.toml, invariants.toml)."""
    domains = {
        domain.name: {
            "response": domain.response,
            "retries_max": domain.retries_max,
            "changed_hypothesis_required": domain.changed_hypothesis_required,
            "blast_radius": domain.blast_radius,
            "description": domain.description,
            "examples": list(domain.examples),
        }
        for domain in spec.domains.values()
    }
    invariants = {
        invariant.name: {"statement": invariant.statement} | ({"triggers": list(invariant.triggers)} if invariant.triggers else {})
        for invariant in spec.invariants.values()
    }
    written = f"# Written by shiftchange.lab from a spec value (digest {spec.digest}); comments are not kept.\n\n"
    documents = {
        FILES["attempt"]: _machine(spec.attempt),
        FILES["task"]: _machine(spec.task),
        FILES["domains"]: {"domains": domains},
        FILES["invariants"]: {"invariants": invariants},
    }
    return {name: written + tomli_w.dumps(document) for name, document in documents.items()}


def write_spec(spec: Spec, folder: str | Path) -> Path:
    """Write `spec` as a spec folder at `folder` (made if missing); returns the folder.

    A folder that already holds these very files is left as it is; one holding other spec files is refused
    (`SpecWriteError`): a replay command naming it must play this spec.
    """
    root = Path(folder)
    files = spec_files(spec)
    try:
        root.mkdir(parents=True, exist_ok=True)
        existing = {name: (root / name).read_text(encoding="utf-8") for name in files if (root / name).is_file()}
        if existing and existing != {name: text for name, text in files.items() if name in existing}:
            raise SpecWriteError(f"{root} already holds another spec's files: name an empty folder")
        for name, text in files.items():
            if name not in existing:
                (root / name).write_text(text, encoding="utf-8")
    except SpecWriteError:
        raise
    except OSError as error:
        raise SpecWriteError(f"cannot write the spec into {root}: {error.strerror or error}") from None
    return root
