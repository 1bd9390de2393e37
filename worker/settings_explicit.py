"""Settings from given values alone, the environment unread: what a library constructor
builds (``MemoryClient.from_url``), so a chat service's own ``MEMWORKER_*`` variables never
leak into a client it configured in code.

>>> explicit_settings(redis_url="redis://cache:6379/0").key_prefix
'mw'
"""

from __future__ import annotations

from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

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
    """Settings from ``values`` alone (pydantic's ``ValidationError`` for a bad or unknown one)."""
    return _ExplicitSettings(**values)
