"""The package installs: `python -m build` makes an sdist and a wheel, and a fresh venv with only
that wheel (and the runtime dependencies pip pulls for it) runs the commands.

Where pip cannot reach an index (an offline machine), the dependencies are borrowed from the
running environment through a .pth file instead of installed; the runtime-dependency assertion
then does not apply and is skipped. CI reaches PyPI and takes the full path.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT
from validator import __version__

pytestmark = [pytest.mark.slow]
TEST_ONLY = {"pytest", "mypy", "ruff", "hypothesis", "jsonschema", "build", "torch"}


def sh(*cmd: str | Path, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)  # fmt: skip


def test_wheel_installs_into_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    # as a user runs it: no test-suite settings (the self-check needs jsonschema, a test dependency)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "VALIDATOR_SELF_CHECK")}
    dist = tmp_path / "dist"
    built = sh(sys.executable, "-m", "build", "--outdir", dist, ROOT, cwd=tmp_path, env=env)
    if built.returncode != 0:  # no index for the isolated build environment: use this one's setuptools
        built = sh(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, ROOT, cwd=tmp_path, env=env)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert {"validator/nodecheck/main.py", "validator/agent/probe.py", "validator/py.typed"} <= names
    assert not any(n.startswith("tests/") for n in names)
    with tarfile.open(sdist) as t:
        assert any(n.endswith("/pyproject.toml") for n in t.getnames())

    venv = tmp_path / "venv"
    assert sh(sys.executable, "-m", "venv", venv, cwd=tmp_path, env=env).returncode == 0
    py, exe = venv / "bin" / "python", venv / "bin" / "validator"
    installed = sh(py, "-m", "pip", "install", "--disable-pip-version-check", wheel, cwd=tmp_path, env=env)
    online = installed.returncode == 0
    if not online:  # offline: the wheel alone, its dependencies borrowed from this environment
        assert sh(py, "-m", "pip", "install", "--no-deps", wheel, cwd=tmp_path, env=env).returncode == 0
        (Path(sh(py, "-c", "import site; print(site.getsitepackages()[0])", cwd=tmp_path, env=env).stdout.strip())
         / "borrowed.pth").write_text("\n".join(site.getsitepackages()) + "\n")  # fmt: skip

    where = sh(py, "-c", "import validator; print(validator.__file__)", cwd=tmp_path, env=env).stdout
    assert where.startswith(str(venv)), where  # the installed copy, not this checkout
    version = sh(exe, "--version", cwd=tmp_path, env=env)
    assert version.stdout.strip() == f"cluster-validator {__version__}", version.stderr
    probe = sh(exe, "probe", "--json", cwd=tmp_path, env=env, timeout=60)
    assert probe.returncode == 0 and json.loads(probe.stdout)["kind"] == "facts", probe.stderr
    (tmp_path / "facts.json").write_text(probe.stdout)
    mine = sh(exe, "check", "facts.json", "-f", "json", cwd=tmp_path, env=env, timeout=60)
    assert mine.returncode in (0, 1) and json.loads(mine.stdout)["participants"] == 1, mine.stderr
    example = sh(exe, "check", FIXTURES / "gpu" / "h200" / "facts-torchrun-env.json", "--profile",
                 ROOT / "launch_profiles" / "torchrun-2x8.yaml", "-f", "json", cwd=tmp_path, env=env, timeout=60)  # fmt: skip
    assert example.returncode == 1, example.stderr
    assert "PRF008" in {f["code"] for f in json.loads(example.stdout)["findings"]}  # the example pins gpu[01-02]
    npd = sh(exe, "node-check", "--mode", "npd", cwd=tmp_path, env=env, timeout=60)
    assert npd.returncode == 0 and npd.stdout.startswith("OK: "), npd.stdout + npd.stderr
    strict = sh(exe, "probe", "--json", cwd=tmp_path, env={**env, "VALIDATOR_SELF_CHECK": "1"}, timeout=60)
    assert strict.returncode == 2 and "needs the jsonschema package" in strict.stderr, strict.stderr
    assert "Traceback" not in strict.stderr
    schema = sh(exe, "schema", "report", cwd=tmp_path, env=env)
    assert schema.stdout == (ROOT / "docs" / "schema" / "report-v1.schema.json").read_text()

    if not online:
        pytest.skip(f"offline: runtime dependencies not installed from an index ({installed.stderr.strip()[-200:]})")
    listed = sh(py, "-m", "pip", "list", "--format", "json", cwd=tmp_path, env=env).stdout
    got = {p["name"].lower().replace("_", "-") for p in json.loads(listed)}
    assert {"typer", "pyyaml", "prometheus-client", "asyncssh", "clustershell", "psutil"} <= got
    assert not got & TEST_ONLY, got & TEST_ONLY  # only the runtime dependencies came along
