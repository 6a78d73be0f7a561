"""A wheel built from the repo installs the plugin folders as darwin.* subpackages only."""

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        check=True,
    )
    (whl,) = out.glob("darwin_mobile_agent-*.whl")
    return whl


def test_wheel_contains_subpackages_and_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for pkg in ("envs", "envs/sim", "envs/sim/apps", "workflows", "curricula", "verifiers", "memory"):
        assert f"darwin/{pkg}/__init__.py" in names
    # Every package in the source tree ships (a forgotten entry in pyproject breaks imports).
    for init in [
        *ROOT.glob("darwin/**/__init__.py"),
        *(
            p
            for d in ("envs", "workflows", "curricula", "verifiers", "memory")
            for p in ROOT.glob(f"{d}/**/__init__.py")
        ),
    ]:
        rel = init.relative_to(ROOT).as_posix()
        assert (rel if rel.startswith("darwin/") else f"darwin/{rel}") in names, rel
    assert "darwin/envs/sim/fonts/DejaVuSans.ttf" in names
    for font in (
        "DroidSansFallback-SimPhone.ttf",
        "LICENSE-DroidSansFallback",
        "Symbola-SimPhone-emoji.ttf",
        "LICENSE-Symbola",
    ):
        assert f"darwin/envs/sim/fonts/{font}" in names, font  # the locale's fallback fonts and their licences
    assert "darwin/data/spa-bench/LICENSE" in names
    assert "darwin/envs/guard_rules.yaml" in names  # the action guard's built-in rules
    assert "darwin/py.typed" in names  # PEP 561: type checkers read the annotations of the installed package
    assert not any(n.startswith(("envs/", "memory/", "workflows/")) for n in names)


def test_wheel_installs_into_a_fresh_venv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    # Dependencies come from this environment's site-packages; darwin itself from the wheel.
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    code = (
        f"import darwin, darwin.envs, darwin.envs.sim, darwin.workflows, darwin.curricula, darwin.verifiers, darwin.memory\n"
        "import importlib.util, pathlib\n"
        f"assert str(pathlib.Path(darwin.__file__).resolve()).startswith(str(pathlib.Path(r'{venv}').resolve())), darwin.__file__\n"
        "assert importlib.util.find_spec('envs') is None and importlib.util.find_spec('memory') is None\n"
        "from darwin.envs.sim.phone import SimPhone\n"
        "assert SimPhone(seed=1).screenshot((54, 120)).shape == (120, 54, 3)\n"
    )
    subprocess.run([str(py), "-c", code], check=True, env=env, cwd=tmp_path)
