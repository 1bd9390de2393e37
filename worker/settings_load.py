"""Building :class:`~worker.settings.Settings` at the edge: from the environment for the
CLI and the workers, from given values alone for a library constructor.

A bad value becomes one :class:`~worker.errors.ConfigurationError` naming every variable that
is wrong, so an operator fixes them all in one go.

>>> load_settings(debounce_seconds=5).debounce_seconds
5.0
"""

from __future__ import annotations

from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from worker.errors import ConfigurationError
from worker.settings import Settings


class _ExplicitSettings(Settings):
    """Settings from constructor arguments only: a library constructor reads no environment."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def explicit_settings(**values: Any) -> Settings:
    """Settings from ``values`` alone, the environment unread (pydantic's ``ValidationError``
    for a bad or unknown one).

    >>> explicit_settings(redis_url="redis://cache:6379/0").key_prefix
    'mw'
    """
    return _ExplicitSettings(**values)


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment (the edge), turning validation errors into one line."""
    from pydantic import ValidationError

    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(
            f"MEMWORKER_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors()
        )
        raise ConfigurationError(f"invalid configuration: {problems}") from None
