"""SW and ENV: versions and settings that must not drift across the job. The outlier is named
against the peer majority; no golden file is needed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any

from validator.checks.base import Check, Hit, Job, check, describe, outliers
from validator.codes import table
from validator.model import Severity
from validator.safejson import clip
from validator.targets import MAX_RANKS

VERSIONS = "python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())'   # on each named host"
PYTHON_VERSION = "python3 -c 'import sys; print(sys.version)'   # on each named host, with the job's interpreter"


def _version_drift(
    job: Job, field: str, what: str, missing_is_error: bool = False, verify: str = VERSIONS
) -> Iterator[Hit]:
    software = job.node_section("software")

    def version(i: int) -> str:
        return str(software[i].get(field) or "not installed")

    expected, groups = job.node_majority(version, "software")
    for value, members in outliers(groups, expected):
        sev = Severity.ERROR if missing_is_error and value == "not installed" else None
        yield Hit(
            f"{what} {value} where the other nodes have {expected} ({describe(job, groups, by_host=True)})",
            members,
            expected=str(expected),
            actual=str(value),
            severity=sev,
            fix=f"install {what} {expected} on the named nodes (same image / environment everywhere)",
            verify=verify,
        )


@check("SW001", Severity.WARNING, "torch version differs")
def torch_version(job: Job) -> Iterator[Hit]:
    """Every node has the same torch version (peer majority); a node without torch where the
    others have it is an error.

    Different releases change c10d's wire formats and defaults (timeouts, Flight Recorder,
    NCCL version bundled), a classic source of hangs after a partial image upgrade.

    Run the whole job from one container image or environment; pin torch==X in requirements.
    """
    yield from _version_drift(job, "torch", "torch", missing_is_error=True)


@check("SW002", Severity.ERROR, "NCCL version differs")
def nccl_version(job: Job) -> Iterator[Hit]:
    """The NCCL library that would load is the same version on every node of a GPU job.

    NCCL refuses mixed versions at init: "Mismatched NCCL version detected : rank %d version %d
    rank %d version %d" (ncclInvalidUsage), after the rendezvous already succeeded.

    Use one image everywhere; check LD_LIBRARY_PATH and NCCL_LIB for a system libnccl that
    shadows the one torch ships.
    """
    if job.uses_gpus:
        yield from _version_drift(job, "nccl", "NCCL")


@check("SW003", Severity.WARNING, "torch CUDA version differs")
def cuda_version(job: Job) -> Iterator[Hit]:
    """torch was built for the same CUDA version on every node (peer majority).

    Mixed CUDA builds of torch usually mean mixed environments, with different NCCL and cuDNN
    versions behind them.

    Install the same torch build (e.g. +cu124) on every node.
    """
    if job.uses_gpus:
        yield from _version_drift(job, "torch_cuda", "torch CUDA")


@check("SW004", Severity.WARNING, "Python version differs")
def python_version(job: Job) -> Iterator[Hit]:
    """The Python that runs the job is the same version on every node (peer majority).

    Pickled objects (object collectives, checkpoints) and compiled extensions differ between
    Python versions; a different interpreter also means a different environment.

    Use the same interpreter and virtual environment or image everywhere.
    """
    yield from _version_drift(job, "python", "Python", verify=PYTHON_VERSION)


# Settings NCCL needs identical on every rank (reference §2.2); drift hangs or changes transports.
MUST_MATCH = (
    "NCCL_IB_DISABLE",
    "NCCL_NET",
    "NCCL_NET_PLUGIN",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_PROTO",
    "NCCL_ALGO",
    "NCCL_SOCKET_FAMILY",
    "NCCL_CROSS_NIC",
    "NCCL_SOCKET_MAGIC",
    "TORCH_DISTRIBUTED_DEBUG",
)
COMPARED = (
    "NCCL_",
    "TORCH_",
    "GLOO_",
    "CUDA_",
    "UCX_",
    "FI_",
    "OMP_NUM_THREADS",
    "USE_LIBUV",
    "LD_LIBRARY_PATH",
)
PER_PROCESS = (
    "CUDA_VISIBLE_DEVICES",
    "TORCHELASTIC_",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "TORCH_FR_DUMP_TEMP_FILE",
    "NCCL_DEBUG_FILE",
    "NCCL_COMM_ID",
)


def _env_drift(job: Job) -> list[tuple[str, str | None, dict[str | None, list[int]]]]:
    """(variable, majority value, value -> participants) for every compared variable that
    differs somewhere. Participants are grouped by their whole compared env first, so a
    100,000-rank job costs one pass plus work per distinct env."""

    def compute() -> list[tuple[str, str | None, dict[str | None, list[int]]]]:
        # the compared names of an env depend only on its names, which nearly every rank shares:
        # filter each distinct name tuple once, then key a rank by its compared values alone
        compared: dict[tuple[str, ...], tuple[tuple[str, ...], Callable[[dict[str, str]], Any]]] = {}
        envs: dict[tuple[tuple[str, ...], tuple[str, ...]], list[int]] = {}
        by_names: dict[tuple[str, ...], list[int]] = job.memo("env.by_names", dict)
        # ranks in a row usually have the same names and compared values (the loader shares
        # equal strings, so comparing them is comparing pointers): look up only what changes
        last_names: tuple[str, ...] | None = None
        last: Any = None
        for i, env in enumerate(job.section("env")):
            names = tuple(env)
            if names != last_names:
                add_same = by_names.setdefault(names, []).append
                found = compared.get(names)
                if found is None:
                    kept = tuple(sorted(k for k in names if k.startswith(COMPARED) and not k.startswith(PER_PROCESS)))
                    getter: Callable[[dict[str, str]], Any] = itemgetter(*kept) if len(kept) > 1 else _values_of(kept)
                    found = compared[names] = (kept, getter)
                keep, get = found
                last_names, last = names, None
            add_same(i)
            values = get(env)
            if values != last or last is None:
                add = envs.setdefault((keep, values), []).append
                last = values
            add(i)
        if len(envs) < 2:  # keys are sorted by name: equal compared envs share one key
            return []
        values = {key: dict(zip(*key, strict=True)) for key in envs}
        all_names = sorted({k for keep, _ in envs for k in keep})
        out = []
        for name in all_names:
            groups: dict[str | None, list[int]] = {}
            for key, members in envs.items():
                groups.setdefault(values[key].get(name), []).extend(members)
            if len(groups) > 1:
                counts = Counter({v: len(m) for v, m in groups.items()})
                top = counts.most_common()
                best = [v for v, c in top if c == top[0][1]]
                expected = next((v for v in best if any(job.is_reference(i) for i in groups[v])), best[0])
                out.append((name, expected, groups))
        return out

    return job.memo("env.drift", compute)


def _values_of(names: tuple[str, ...]) -> Callable[[dict[str, str]], tuple[str, ...]]:
    """itemgetter's tuple, for zero or one name (itemgetter of one name returns a bare value)."""
    return lambda env: tuple(env[n] for n in names)


def _show(v: str | None) -> str:
    return "unset" if v is None else repr(v)


def _env_hits(job: Job, must_match: bool) -> Iterator[Hit]:
    for name, expected, groups in _env_drift(job):
        if (name in MUST_MATCH) == must_match:
            for value, who in outliers(groups, expected):
                yield Hit(
                    f"{name}={_show(value)} where the rest of the job has {_show(expected)}",
                    who,
                    expected=_show(expected),
                    actual=_show(value),
                    fix=f"set {name}={expected} on every rank"
                    if expected is not None
                    else f"unset {name} on the named ranks",
                    verify=f"env | grep ^{name}=   # on each named host, in the job's environment",
                )


@check("ENV001", Severity.WARNING, "Environment differs from the other ranks")
def env_drift(job: Job) -> Iterator[Hit]:
    """NCCL_*, TORCH_*, GLOO_*, CUDA_*, UCX_*, FI_* variables, OMP_NUM_THREADS, USE_LIBUV and
    LD_LIBRARY_PATH are the same on every rank (peer majority; per-process ones such as
    CUDA_VISIBLE_DEVICES are skipped).

    A variable set on some nodes only (a module loaded in one shell, a stale export in
    ~/.bashrc) changes timeouts, transports or the library that loads on those nodes only.

    Set the variable in the job script or image for all ranks, or remove it from the outliers.
    """
    yield from _env_hits(job, must_match=False)


@check("ENV002", Severity.ERROR, "NCCL setting that must match differs")
def env_must_match(job: Job) -> Iterator[Hit]:
    """Settings that must be identical on every rank are: NCCL_IB_DISABLE, NCCL_NET,
    NCCL_NET_PLUGIN, NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_PROTO, NCCL_ALGO,
    NCCL_SOCKET_FAMILY, NCCL_CROSS_NIC, NCCL_SOCKET_MAGIC, TORCH_DISTRIBUTED_DEBUG.

    Ranks that disagree pick different transports or protocols (IB on some, sockets on others)
    and hang in their first collective; TORCH_DISTRIBUTED_DEBUG=DETAIL on some ranks only adds
    collectives the others never call.

    Export these in the job script for all ranks, never per node.
    """
    yield from _env_hits(job, must_match=True)


CHECK_ENV_FLAGS = (
    "PET_STANDALONE",
    "PET_MODULE",
    "PET_NO_PYTHON",
    "PET_RUN_PATH",
    "PET_VIRTUAL_LOCAL_RANK",
)


@check("ENV003", Severity.ERROR, "torchrun flag variable is not an integer")
def pet_flags(job: Job) -> Iterator[Hit]:
    """PET_STANDALONE, PET_MODULE, PET_NO_PYTHON, PET_RUN_PATH and PET_VIRTUAL_LOCAL_RANK, when
    set, are integers (torchrun reads them as bool(int(value))).

    torchrun crashes before doing anything: `ValueError: invalid literal for int() with base 10:
    ''`. Kubeflow's training-operator v1 sets PET_STANDALONE="" when elasticPolicy.standalone is
    true.

    Unset the variable or set it to 0/1 (for Kubeflow: drop `standalone` from elasticPolicy and
    pass --standalone explicitly).
    """
    groups: dict[str, list[int]] = {}
    flags = frozenset(CHECK_ENV_FLAGS)
    _env_drift(job)  # groups participants by their variables' names as a side effect
    by_names: dict[tuple[str, ...], list[int]] = job.memo("env.by_names", dict)
    for i in sorted(i for names, members in by_names.items() if not flags.isdisjoint(names) for i in members):
        for name in CHECK_ENV_FLAGS:
            v = job.facts[i]["env"].get(name)
            if v is not None and not v.strip().lstrip("-").isdecimal():
                groups.setdefault(f"{name}={v!r}", []).append(i)
    for what, members in groups.items():
        yield Hit(
            f"{what}: torchrun will crash with ValueError: invalid literal for int()",
            members,
            expected="0 or 1",
            actual=what,
            fix=f"unset {what.split('=')[0]} or set it to 0/1",
            verify="env | grep ^PET_   # in the pod or job environment",
        )


@check("ENV004", Severity.ERROR, "Launch variable is not a number")
def invalid_values(job: Job) -> Iterator[Hit]:
    """Rank and size variables (RANK, WORLD_SIZE, LOCAL_RANK, SLURM_PROCID, PET_NNODES, ...)
    and their torchrun options parse as integers.

    torch and torchrun raise on them at start (`ValueError: invalid literal for int()`), on the
    affected ranks only.

    Fix the value in the launch script; a common cause is an unexpanded `$VAR` or `${VAR}`.
    """
    groups: dict[str, list[int]] = {}
    invalid = job.column("invalid")
    for i in [i for i, bad in enumerate(invalid) if bad]:
        for src, raw in invalid[i].items():
            if "PORT" not in src.upper() and "port" not in src:
                groups.setdefault(f"{src.removeprefix('env:')}={clip(raw)}", []).append(i)
    for what, members in groups.items():
        number = what.partition("=")[2].strip("'").lstrip("-").isdecimal()
        yield Hit(
            f"{what} is larger than any job ({MAX_RANKS:,} ranks)" if number else f"{what} is not an integer",
            members,
            expected="an integer",
            actual=what,
            fix="fix the value in the launch script",
            verify="validator probe --json | grep -A3 invalid",
        )


@check("ENV005", Severity.ERROR, "Launch command does not parse")
def command_errors(job: Job) -> Iterator[Hit]:
    """The wrapped launch command (torchrun, deepspeed) parses with the launcher's own options.

    torchrun exits with a usage error on that node only (`error: unrecognized arguments`), and
    the other nodes wait for it until the rendezvous timeout.

    Fix the option on the named nodes (`torchrun --help` lists the valid ones for your version).
    """
    groups: dict[str, list[int]] = {}
    commands = job.column("command")
    for i in [i for i, cmd in enumerate(commands) if cmd and cmd["errors"]]:
        for err in commands[i]["errors"]:
            groups.setdefault(err, []).append(i)
    for err, members in groups.items():
        yield Hit(
            err, members, expected="a valid command", actual=err, fix="fix the launch command", verify="torchrun --help"
        )


CODES: dict[str, Check] = table(
    torch_version,
    nccl_version,
    cuda_version,
    python_version,
    env_drift,
    env_must_match,
    pet_flags,
    invalid_values,
    command_errors,
)
