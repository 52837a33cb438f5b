"""Specification of the Gymnasium version check: an unsupported Gymnasium gets one clear error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envmanager.gymnasium_version import (
    SUPPORTED_GYMNASIUM,
    UnsupportedGymnasiumError,
    check_gymnasium_version,
    is_supported_gymnasium,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("installed", ["1.4.0", "1.4.1", "1.5.0rc1", "1.10.2"])
def test_gymnasium_1_4_and_later_1_x_are_supported(installed):
    assert is_supported_gymnasium(installed)


@pytest.mark.parametrize("installed", ["0.29.1", "1.0.0", "1.0.0a2", "1.1.0", "1.3.0", "2.0.0", "unknown"])
def test_other_versions_are_not(installed):
    assert not is_supported_gymnasium(installed)


def test_the_error_names_the_installed_and_the_supported_versions():
    with pytest.raises(UnsupportedGymnasiumError, match=r"supports gymnasium>=1\.4,<2, but gymnasium 0\.29\.1 is installed"):
        check_gymnasium_version("0.29.1")


def test_the_error_is_an_import_error():
    assert issubclass(UnsupportedGymnasiumError, ImportError)


def test_the_installed_gymnasium_passes():
    check_gymnasium_version()


def test_the_supported_range_is_the_one_pyproject_declares():
    assert f'"gymnasium{SUPPORTED_GYMNASIUM}"' in (ROOT / "pyproject.toml").read_text()


def install_fake_gymnasium(site: Path, version: str) -> None:
    """A Gymnasium distribution of another version, first on the path of a new interpreter."""
    (site / "gymnasium").mkdir(parents=True)
    (site / "gymnasium" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    metadata = site / f"gymnasium-{version}.dist-info"
    metadata.mkdir()
    (metadata / "METADATA").write_text(f"Metadata-Version: 2.1\nName: gymnasium\nVersion: {version}\n")


def test_importing_envmanager_with_gymnasium_0_29_says_what_to_install(tmp_path):
    install_fake_gymnasium(tmp_path, "0.29.1")
    result = subprocess.run([sys.executable, "-c", "import envmanager"], capture_output=True,
                            text=True, timeout=120, env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "envmanager.gymnasium_version.UnsupportedGymnasiumError: envmanager supports "
        "gymnasium>=1.4,<2, but gymnasium 0.29.1 is installed: pip install 'gymnasium>=1.4,<2' "
        "(rlprof's profiler and `rlprof analyze` work with any Gymnasium, or none)")


def test_an_imported_gymnasium_is_checked_by_its_own_version(tmp_path):
    install_fake_gymnasium(tmp_path, "0.29.1")
    (tmp_path / "gymnasium-0.29.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: gymnasium\nVersion: 1.4.0\n")  # metadata that says otherwise
    result = subprocess.run([sys.executable, "-c", "import gymnasium, envmanager"], capture_output=True,
                            text=True, timeout=120, env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 1
    assert "but gymnasium 0.29.1 is installed" in result.stderr.splitlines()[-1]


def test_an_env_worker_that_imported_gymnasium_does_not_read_the_package_metadata():
    # A spawn or forkserver worker of `rlprof run` unpickles the vector env's worker function
    # (Gymnasium's) before its env factory (envmanager's): importlib.metadata would cost it more
    # than the rest of rlprof's imports.
    result = subprocess.run(
        [sys.executable, "-c", "import sys, gymnasium, envmanager.instrumentation.factories; "
                               "print('importlib.metadata' in sys.modules)"],
        capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["False"], result.stderr
