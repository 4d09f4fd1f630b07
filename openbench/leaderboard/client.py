"""The HTTP client of a served board (standard library only): one POST, errors as one line."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

from openbench.errors import OpenbenchError, UsageError

__all__ = ["post"]


def post(server: str, route: str, body: bytes, content_type: str, token: Optional[str], fields: dict,
         timeout: float = 300.0) -> dict:
    """POST ``body`` to ``server`` + ``route`` with the bearer ``token``; returns the JSON answer.
    Refusals are OpenbenchErrors carrying the server's reason."""
    if not token:
        raise UsageError("--token is needed to submit to a server (or set OPENBENCH_TOKEN)")
    query = urllib.parse.urlencode({key: value for key, value in fields.items() if value is not None})
    request = urllib.request.Request(server.rstrip("/") + route + "?" + query, data=body, method="POST",
                                     headers={"Content-Type": content_type, "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        try:
            reason = json.loads(error.read().decode("utf-8")).get("error", error.reason)
        except ValueError:
            reason = error.reason
        raise OpenbenchError(f"{server}: refused ({error.code}): {reason}") from None
    except (urllib.error.URLError, OSError) as error:
        raise OpenbenchError(f"{server}: cannot be reached ({getattr(error, 'reason', error)})") from None
