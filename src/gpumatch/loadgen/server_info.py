"""What the server says about itself, for the run's manifest: ``GET /v1/models`` (served model ids and, where the
server reports it, ``max_model_len``), ``GET /version`` (vLLM, SGLang's ``/get_server_info`` is not read) and the
``Server`` response header. A server that does not answer at all is a bad endpoint (one-line InputError, exit 2)."""

from __future__ import annotations

import asyncio
from typing import Any

from gpumatch.errors import InputError

PROBE_TIMEOUT_S = 10.0
FETCH_TIMEOUT_S = 10.0


def probe(base_url: str, api_key: str | None = None) -> dict[str, Any]:
    """``{"models": [...], "version": ..., "server_header": ...}``; raises InputError when nothing answers."""
    return asyncio.run(_probe(base_url, api_key))


async def _probe(base_url: str, api_key: str | None) -> dict[str, Any]:
    import aiohttp

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
    info: dict[str, Any] = {"base_url": base_url, "models": [], "version": None, "server_header": None}
    async with aiohttp.ClientSession(timeout=timeout, headers=headers) as s:
        try:
            async with s.get(f"{base_url}/v1/models") as r:
                info["server_header"] = r.headers.get("Server")
                info["models_status"] = r.status
                if r.status == 200:
                    doc = await r.json(content_type=None)
                    info["models"] = [_model(m) for m in (doc.get("data") or []) if isinstance(m, dict)]
        except (aiohttp.ClientConnectorError, TimeoutError) as e:
            raise InputError(f"no server answers at {base_url} ({type(e).__name__}: {e})",
                             "start the server first, or check --endpoint") from None
        except (aiohttp.ClientError, ValueError, AttributeError):
            pass  # answers, but not with a model list: the run will show what it can do
        try:
            async with s.get(f"{base_url}/version") as r:
                if r.status == 200:
                    doc = await r.json(content_type=None)
                    info["version"] = doc.get("version") if isinstance(doc, dict) else None
        except (aiohttp.ClientError, TimeoutError, ValueError):
            pass
    return info


def get_json(url: str, api_key: str | None = None, params: dict[str, str] | None = None) -> Any:
    """The JSON document at ``url`` (one GET), or None when the server answers with anything but 200 and JSON, or
    not at all within :data:`FETCH_TIMEOUT_S` (the endpoints only ``gpumatch serve`` has: telemetry, pass log)."""
    return asyncio.run(_get_json(url, api_key, params))


async def _get_json(url: str, api_key: str | None, params: dict[str, str] | None) -> Any:
    import aiohttp

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S),
                                         headers=headers) as s, s.get(url, params=params) as r:
            if r.status != 200:
                return None
            return await r.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


def _model(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m.get(k) for k in ("id", "owned_by", "max_model_len", "root") if m.get(k) is not None}
