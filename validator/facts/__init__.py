"""Raw agent output -> typed facts. Pure functions: no I/O, no clocks, no lookups."""

from __future__ import annotations

import json

from validator import FACTS_SCHEMA, __version__
from validator.errors import UserError
from validator.facts.command import parse_command
from validator.facts.gpu import parse_gpus
from validator.facts.ib import parse_ib
from validator.facts.launch import parse_launch
from validator.facts.layout import parse_layout
from validator.facts.network import gloo_select, master_facts, nccl_select, parse_interfaces
from validator.facts.node import parse_software, parse_system
from validator.facts.schema import validate_facts
from validator.safejson import clip

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import Facts

AGENT_SCHEMA = 1


def parse(raw: dict[str, Any]) -> Facts:
    """Turn one agent document into facts. Missing pieces become empty facts, never errors."""
    if raw.get("agent_schema", 0) > AGENT_SCHEMA:
        raise UserError(f"agent output schema {raw['agent_schema']} is newer than this validator")
    env: dict[str, str] = dict(raw.get("env") or {})
    hostname = str(raw.get("hostname", "unknown"))
    argv = raw.get("argv")
    command = parse_command(list(argv)) if argv else None
    launch = parse_launch(env, command, raw.get("configs"))
    launch["layout"] = parse_layout(
        list(argv or []), raw.get("configs"), env, (raw.get("packages") or {}).get("accelerate")
    )
    software = parse_software(raw)
    ifaces_raw = raw.get("interfaces") or {}
    interfaces = parse_interfaces(ifaces_raw.get("ip_addr") or [], raw.get("sysfs_net") or {})
    resolved = raw.get("resolve") or {}
    host_res = resolved.get(hostname) or {}
    return {
        "schema": FACTS_SCHEMA,
        "kind": "facts",
        "validator": __version__,
        "host": env.get("SLURMD_NODENAME") or env.get("POD_NAME") or hostname,
        "hostname": hostname,
        "pid": int(raw.get("pid", 0)),
        "probe_ms": float(raw.get("probe_ms", 0.0)),
        "errors": {**dict(raw.get("errors") or {}), **ib_errors(raw.get("ib"))},
        "launch": launch,
        "gpus": parse_gpus(raw.get("gpus"), env),
        "network": {
            "interfaces": interfaces,
            "nccl": nccl_select(interfaces, env, software["nccl"]),
            "gloo": gloo_select(interfaces, env, hostname, list(host_res.get("addrs", []))),
            "master": master_facts(
                launch["master_addr"],
                launch["master_port"],
                resolved,
                raw.get("routes") or {},
                raw.get("port_probe"),
                interfaces,
            ),
        },
        "software": software,
        "system": parse_system(raw),
        "env": env,
        "ib": parse_ib(raw.get("ib"), env),
    }


def ib_errors(ib: Any) -> dict[str, str]:
    """sysfs files the agent could not read under /sys/class/infiniband, as collector errors."""
    errs = ib.get("errors") if isinstance(ib, dict) else None
    return {f"ib:{path}": str(err) for path, err in list((errs or {}).items())[:8]}


def load_facts(doc: Any, where: str) -> Facts:
    """A facts document, or a raw agent document parsed into one; validated either way."""
    if isinstance(doc, dict) and doc.get("kind") == "raw":
        try:
            doc = parse(doc)
        except UserError as e:  # e.g. a newer agent: name the input it came from
            raise UserError(e.message, where) from None
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise UserError(
                f"agent output could not be parsed: {type(e).__name__}: {clip(str(e), 80)}", where
            ) from None
    return validate_facts(doc, where)


def dumps(facts: Facts) -> str:
    return json.dumps(facts, separators=(",", ":"), sort_keys=False)
