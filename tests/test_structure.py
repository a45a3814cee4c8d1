"""The package's shape: importing it changes nothing in the host process; the one log-once helper;
the version written once (pyproject.toml); the import contracts (`lint-imports` in `make lint`) name
every private module, and the test helpers import only the public API."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import litellm_governance

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")
from litellm_governance.integration.failures import MAX_KEYS, LogOnce, where

ROOT = Path(__file__).resolve().parent.parent

# Imports the modules named on its command line in a fresh process with every connection refused,
# and prints what changed: environment variables, logging handlers, whether LiteLLM got imported.
PROBE = """
import json, logging, os, socket, sys

def refuse(*args, **kwargs):
    raise OSError("network disabled by the test")

socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

def handlers():
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    return {f"{logger.name}:{type(handler).__name__}" for logger in loggers for handler in logger.handlers}

env, before = dict(os.environ), handlers()
for name in sys.argv[1:]:
    __import__(name)
print(json.dumps({
    "environ": {k: v for k, v in os.environ.items() if env.get(k) != v},
    "removed": sorted(set(env) - set(os.environ)),
    "handlers": sorted(handlers() - before),
    "governance_handlers": len(logging.getLogger("litellm_governance").handlers),
    "litellm": "litellm" in sys.modules,
}))
"""


def probe(*modules: str) -> dict[str, Any]:
    """What importing `modules` (in order) in a fresh process changes in it."""
    # LiteLLM's switch is left unset (it is the host's choice), so that setting it would show.
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *modules], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


class TestImportSideEffects:
    def test_the_package_changes_nothing(self) -> None:
        """Importing litellm_governance sets no environment variable, adds no logging handler and
        does not import LiteLLM."""
        changes = probe("litellm_governance")
        assert changes == {"environ": {}, "removed": [], "handlers": [], "governance_handlers": 0, "litellm": False}

    @pytest.mark.litellm
    def test_the_integration_changes_only_what_litellm_itself_does(self) -> None:
        """Importing litellm_governance.integration (then the package) changes the process exactly as
        importing the LiteLLM modules it uses does: no environment variable of ours (in particular
        not LiteLLM's LITELLM_LOCAL_MODEL_COST_MAP), no logging handler of ours."""
        litellm_alone = probe("litellm", "litellm.exceptions", "litellm.integrations.custom_logger")
        ours = probe("litellm_governance.integration", "litellm_governance")
        assert "LITELLM_LOCAL_MODEL_COST_MAP" not in ours["environ"]
        assert ours["governance_handlers"] == 0
        assert ours == litellm_alone


class TestLogOnce:
    @staticmethod
    def levels(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int]]:
        return [(record.getMessage(), record.levelno) for record in caplog.records]

    def test_first_at_its_level_then_at_debug(self, caplog: pytest.LogCaptureFixture) -> None:
        """A key's first message is logged at the level asked, every later one at DEBUG."""
        caplog.set_level(logging.DEBUG, logger="litellm_governance")
        once = LogOnce(logging.getLogger("litellm_governance"))
        for key in ("a", "a", "b"):
            once.log(key, logging.WARNING, "failed %s", key)
        assert self.levels(caplog) == [
            ("failed a", logging.WARNING),
            ("failed a", logging.DEBUG),
            ("failed b", logging.WARNING),
        ]

    def test_again_after_the_interval_and_silent_in_between(self, caplog: pytest.LogCaptureFixture) -> None:
        """With `every`, a lasting problem is logged again once the interval is over; `then=None`
        says nothing in between."""
        caplog.set_level(logging.DEBUG, logger="litellm_governance")
        now = [0.0]
        once = LogOnce(logging.getLogger("litellm_governance"), every=60.0, then=None, clock=lambda: now[0])
        for moment in (0.0, 30.0, 59.9, 60.0, 100.0, 120.0):
            now[0] = moment
            once.log("config", logging.WARNING, "at %s", moment)
        assert self.levels(caplog) == [
            ("at 0.0", logging.WARNING),
            ("at 60.0", logging.WARNING),
            ("at 120.0", logging.WARNING),
        ]

    def test_keys_are_bounded(self) -> None:
        """It remembers at most MAX_KEYS keys: the oldest is forgotten first."""
        once = LogOnce(logging.getLogger("litellm_governance"))
        for key in range(MAX_KEYS + 1):
            assert once.due(key)
        assert not once.due(MAX_KEYS)
        assert once.due(0)

    def test_where_names_the_code_not_the_data(self) -> None:
        """`where` is the file and line an exception came from, never its text."""
        try:
            raise ValueError("secret message content")
        except ValueError as exc:
            location = where(exc)
        assert location.startswith("test_structure.py:") and "secret" not in location
        assert where(ValueError("never raised")) == "?"


class TestVersion:
    def test_the_version_comes_from_the_installed_metadata(self) -> None:
        """__version__ is the installed distribution's (written once, in pyproject.toml)."""
        assert litellm_governance.__version__ == importlib.metadata.version("litellm-governance")

    def test_a_checkout_that_was_never_installed_says_so(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without installed metadata the version is 0+unknown (a valid version that sorts first)."""

        def missing(name: str) -> str:
            raise importlib.metadata.PackageNotFoundError(name)

        monkeypatch.setattr(importlib.metadata, "version", missing)
        assert litellm_governance._installed_version() == "0+unknown"


class TestImportContracts:
    @staticmethod
    def contracts() -> dict[str, dict[str, Any]]:
        config = tomllib.loads((ROOT / "pyproject.toml").read_text())
        return {contract["id"]: contract for contract in config["tool"]["importlinter"]["contracts"]}

    @staticmethod
    def private_modules() -> set[str]:
        package = ROOT / "litellm_governance"
        return {f"litellm_governance.{path.stem}" for path in package.glob("_*.py") if not path.stem.startswith("__")}

    def test_the_contracts_name_every_private_module(self) -> None:
        """import-linter has no wildcard for `_*`: the contracts list the private modules by name, and
        every litellm_governance/_*.py is on each list (a new one cannot slip past them)."""
        contracts, private = self.contracts(), self.private_modules()
        assert private <= set(contracts["testing-uses-the-public-api"]["forbidden_modules"])
        assert set(contracts["core-never-imports-integration"]["source_modules"]) == private
        litellm_free = set(contracts["litellm-only-in-models-and-integration"]["source_modules"])
        assert litellm_free >= private - {"litellm_governance._models"}

    def test_the_test_helpers_import_only_public_names(self) -> None:
        """Every name litellm_governance.testing imports from the plugin is in litellm_governance.__all__
        (the contract forbids its private modules; this covers names taken from the package itself)."""
        public = set(litellm_governance.__all__)
        for path in sorted((ROOT / "litellm_governance" / "testing").rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "litellm_governance":
                    names = {alias.name for alias in node.names}
                    assert names <= public, f"{path.name} imports {sorted(names - public)}"


class TestHypothesisProfiles:
    def test_every_property_takes_its_examples_from_the_profile(self) -> None:
        """``HYPOTHESIS_PROFILE`` sets how long every property searches: a test that names its own
        example count scales it with `builders.examples`, never a bare number the profile cannot move."""
        for path in sorted((ROOT / "tests").rglob("*.py")):
            if path.name == "conftest.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.keyword) and node.arg == "max_examples":
                    scaled = isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "examples"
                    assert scaled, f"{path.name}:{node.value.lineno} sets max_examples without builders.examples"

    def test_examples_follow_the_loaded_profile(self) -> None:
        """300 examples at the default profile is the loaded profile's count; others in proportion."""
        from hypothesis import settings

        from .builders import examples

        loaded = settings.default.max_examples
        assert examples(300) == loaded and examples(150) == max(1, loaded // 2) and examples(1) >= 1


class TestReadableSize:
    """The runtime stays readable in an afternoon (#53): no module over 400 lines, no function over
    60, and ruff's complexity rules on for it with their defaults (`make lint` runs them)."""

    RUNTIME = [p for p in (ROOT / "litellm_governance").rglob("*.py") if "testing" not in p.parts]

    def test_no_module_over_400_lines(self) -> None:
        lines = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in self.RUNTIME}
        assert {p: n for p, n in lines.items() if n > 400} == {}

    def test_no_function_over_60_lines(self) -> None:
        long = []
        for path in self.RUNTIME:
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    size = (node.end_lineno or node.lineno) - node.lineno + 1
                    if size > 60:
                        long.append(f"{path.name}:{node.name} {size}")
        assert long == []

    def test_the_complexity_rules_are_on_for_the_runtime(self) -> None:
        lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
        rules = {"PLR0911", "PLR0912", "PLR0915"}
        assert "PL" in lint["select"] and not rules & set(lint["ignore"])
        exempt = [glob for glob, ignored in lint["per-file-ignores"].items() if rules & set(ignored)]
        assert all(glob.startswith(("tests/", "bench/", "litellm_governance/testing/")) for glob in exempt)


class TestOneHomeEach:
    """Knowledge in one place each (#53): what differs between the request formats only in their
    descriptions (`_formats.FORMATS`) and their outline modules, step names only from the step table
    (`_steps`): elsewhere, no branch on a format's name and no step name spelled out."""

    RUNTIME = [p for p in (ROOT / "litellm_governance").rglob("*.py") if "testing" not in p.parts]
    FORMAT_MODULES = frozenset({"_formats.py", "_anthropic.py", "_responses.py"})

    @staticmethod
    def _constants(node: ast.expr) -> list[object]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [item.value for item in items if isinstance(item, ast.Constant)]

    def test_no_branch_on_a_format_name_outside_the_format_modules(self) -> None:
        from litellm_governance._formats import FORMAT_NAMES

        found = []
        for path in self.RUNTIME:
            if path.name in self.FORMAT_MODULES:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Compare):
                    continue
                left = node.left.id if isinstance(node.left, ast.Name) else getattr(node.left, "attr", "")
                named = [c for side in node.comparators for c in self._constants(side) if c in FORMAT_NAMES]
                if left in ("fmt", "format") and named:
                    found.append(f"{path.name}:{node.lineno}")
        assert found == []

    def test_no_step_name_spelled_out_outside_the_step_table(self) -> None:
        from litellm_governance._steps import STEPS

        assert self._spelled_out({s.name for s in STEPS}, besides="_steps.py") == []

    def test_where_the_plugin_logs_in_a_request_is_named_in_one_module(self) -> None:
        """``spend_logs_metadata`` and the plugin's keys in it (its report, the context edits it
        applied, a compaction answer's figures) are spelled out in `integration.fields` alone."""
        from litellm_governance.integration import fields

        keys = {"spend_logs_metadata", fields.REPORT_KEY, fields.EDITS_KEY, fields.ANSWER_KEY} - {fields.SETTINGS_KEY}
        assert self._spelled_out(keys, besides="fields.py") == []

    def _spelled_out(self, values: set[str], *, besides: str) -> list[str]:
        """Where a runtime module other than `besides` has one of `values` as a literal string."""
        found = []
        for path in self.RUNTIME:
            if path.name != besides:
                for node in ast.walk(ast.parse(path.read_text())):
                    if isinstance(node, ast.Constant) and node.value in values:
                        found.append(f"{path.name}:{node.lineno} {node.value}")
        return found
