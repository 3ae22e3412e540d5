"""The container image recipe: pinned base, non-root numeric user, pinned runtime dependencies."""

from __future__ import annotations

import json
import re
import tomllib
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy import support

DOCKERFILE = (support.REPO / "Dockerfile").read_text()


def _pins() -> dict[str, str]:
    pins = {}
    for line in (support.DEPLOY / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version), f"not pinned: {line!r}"
            pins[canonicalize_name(name)] = version
    return pins


def test_base_image_is_a_pinned_python_311_slim() -> None:
    bases = re.findall(r"^FROM\s+(\S+)", DOCKERFILE, re.MULTILINE)
    assert bases and all(re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", b) for b in bases), bases


def test_image_runs_accelscore_as_a_numeric_non_root_user() -> None:
    [user] = re.findall(r"^USER\s+(\S+)", DOCKERFILE, re.MULTILINE)
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    [entrypoint] = re.findall(r"^ENTRYPOINT\s+(.+)$", DOCKERFILE, re.MULTILINE)
    assert json.loads(entrypoint) == ["accelscore"]
    assert "--constraint deploy/constraints.txt" in DOCKERFILE


def test_every_runtime_dependency_is_pinned_within_pyproject_bounds() -> None:
    project = tomllib.loads((support.REPO / "pyproject.toml").read_text())["project"]
    pins = _pins()
    for spec in project["dependencies"]:
        req = Requirement(spec)
        version = pins.get(canonicalize_name(req.name))
        assert version is not None, f"{req.name} is not pinned in deploy/constraints.txt"
        assert req.specifier.contains(version, prereleases=True), f"{req.name}=={version} violates {spec}"


def test_constraints_hold_no_test_or_dev_tools() -> None:
    project = tomllib.loads((support.REPO / "pyproject.toml").read_text())["project"]
    dev = {canonicalize_name(Requirement(s).name) for extra in project["optional-dependencies"].values()
           for s in extra}
    runtime = {canonicalize_name(Requirement(s).name) for s in project["dependencies"]}
    assert set(_pins()) & (dev - runtime) == set()


def test_dockerignore_lets_the_build_inputs_through() -> None:
    ignore = (support.REPO / ".dockerignore").read_text().splitlines()
    lines = re.findall(r"^COPY\s+(?!--from)(.+)$", DOCKERFILE, re.MULTILINE)
    sources = [source for line in lines for source in line.split()[:-1]]
    assert "README.md" in sources
    for source in sources:
        assert f"!{source.rstrip('/')}" in ignore or f"!{source.rstrip('/')}/" in ignore, source


def test_the_dev_install_takes_the_image_pins() -> None:
    """`make` builds the venv with the constraints file the image installs, and rebuilds it when the pins change."""
    makefile = (support.REPO / "Makefile").read_text()
    [rule] = re.findall(r"^\$\(STAMP\):.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert re.search(r"^\$\(STAMP\):.*deploy/constraints\.txt", makefile, re.MULTILINE)
    install = next(line for line in rule.splitlines() if "-e '.[test]'" in line)
    assert "--constraint deploy/constraints.txt" in install


def test_the_environment_under_test_runs_the_image_pins() -> None:
    """Every pinned runtime dependency is installed here at the pinned version: what is tested is what ships."""
    installed = {}
    for name in _pins():
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed[name] = "absent"
    assert installed == _pins()
