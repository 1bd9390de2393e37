"""What the installed package ships besides its modules."""

from __future__ import annotations

from importlib.resources import files


def test_the_package_is_marked_typed_for_type_checkers() -> None:
    package = files("worker")

    assert package.joinpath("__init__.py").is_file()
    assert package.joinpath("py.typed").is_file()
