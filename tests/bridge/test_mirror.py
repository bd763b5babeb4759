"""The bridge's tests mirror its packages: every package bridge/<pkg>/ has its tests in
tests/bridge/<pkg>/, so a reader finds them where the code is."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def unmirrored(root: Path) -> list[str]:
    """The packages of `root`/bridge without a test module in `root`/tests/bridge/<pkg>/."""
    packages = sorted(p.parent.name for p in (root / "bridge").glob("*/__init__.py"))
    return [pkg for pkg in packages
            if not any((root / "tests" / "bridge" / pkg).glob("test_*.py"))]


def test_every_bridge_package_has_its_tests_beside_the_others() -> None:
    assert unmirrored(ROOT) == []


def test_a_package_without_tests_is_named(tmp_path: Path) -> None:
    (tmp_path / "bridge" / "wire").mkdir(parents=True)
    (tmp_path / "bridge" / "wire" / "__init__.py").touch()
    (tmp_path / "bridge" / "fresh").mkdir()
    (tmp_path / "bridge" / "fresh" / "__init__.py").touch()
    (tmp_path / "tests" / "bridge" / "wire").mkdir(parents=True)
    (tmp_path / "tests" / "bridge" / "wire" / "test_mux.py").touch()
    (tmp_path / "tests" / "bridge" / "fresh").mkdir()  # a directory alone is not tests
    assert unmirrored(tmp_path) == ["fresh"]
