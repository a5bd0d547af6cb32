"""The service's exception family; each class carries the HTTP status it maps to."""

from __future__ import annotations

from typing import Any


class DoctorError(Exception):
    """Base of every error the service raises on purpose."""

    status: int = 500
    title: str = "Internal error"
    type_: str = "about:blank"

    def __init__(
        self, detail: str, *, headers: dict[str, str] | None = None, extensions: dict[str, Any] | None = None
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers or {}
        self.extensions = extensions or {}  # extra problem+json members, e.g. the failing fields


class ConfigError(DoctorError):
    """The configuration (environment or options) is invalid."""

    status = 500
    title = "Invalid configuration"


class BadInput(DoctorError):
    """The request is malformed (not JSON, wrong content type)."""

    status = 400
    title = "Bad request"


class InputTooLarge(DoctorError):
    """The request body is over the size limit."""

    status = 413
    title = "Request body too large"


class InvalidInput(DoctorError):
    """The request is well-formed but its fields fail validation."""

    status = 422
    title = "Invalid request"


class Unauthorized(DoctorError):
    """A required bearer token is missing or wrong."""

    status = 401
    title = "Unauthorized"


class NotFound(DoctorError):
    """The named resource does not exist."""

    status = 404
    title = "Not found"


class Disabled(DoctorError):
    """The endpoint is turned off by configuration."""

    status = 403
    title = "Disabled"


class Busy(DoctorError):
    """The requested run cannot start: another index or sync run is in progress."""

    status = 409
    title = "Busy"


class NotReady(DoctorError):
    """The index is still being built or the store is unreachable."""

    status = 503
    title = "Service not ready"


class VocabError(DoctorError):
    """The Harmony vocabulary could not be provisioned or failed its checksum."""

    status = 503
    title = "Harmony vocabulary unavailable"
