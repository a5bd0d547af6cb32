"""Health, index status and the admin-triggered index runs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from service.api.errors import PROBLEM_JSON
from service.deps import RuntimeDep, SchedulerDep, require_admin_token, require_read_token
from service.engine import index_info
from service.errors import Busy, NotReady
from service.models import HealthResponse, IndexStatus, ReadyResponse, RunAccepted, SchedulerState
from service.scheduler import RunKind

router = APIRouter(tags=["status"])

_PROBLEM = {"content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}}


@router.get("/health", response_model=HealthResponse, summary="Liveness")
def health(runtime: RuntimeDep) -> HealthResponse:
    """Always 200 while the process runs: ``starting``, ``ok``, or ``degraded`` with the reasons.

    A failed re-index degrades, never breaks, health: the last good index keeps serving. Probe this for
    liveness (restart when it stops answering) and ``/ready`` for readiness (send traffic).
    """
    if runtime.engine is None:
        if runtime.state == "failed":
            return HealthResponse(status="degraded", reasons=[runtime.not_ready_detail()])
        return HealthResponse(status="starting", reasons=[runtime.not_ready_detail()])
    runtime.engine.reload_if_changed()  # probes the store (rate-limited, bounded) so recovery shows
    reasons = runtime.engine.degraded_reasons(writing=bool(runtime.scheduler and runtime.scheduler.running))
    last = runtime.scheduler.last_run if runtime.scheduler else None
    if last is not None and not last.get("ok"):
        reasons.append(f"last {last.get('kind')} run failed: {last.get('error')}; the previous index is serving")
    return HealthResponse(status="degraded" if reasons else "ok", reasons=reasons)


@router.get(
    "/ready",
    response_model=ReadyResponse,
    summary="Readiness",
    responses={503: {"description": "Still loading (or retrying) the index; see Retry-After", **_PROBLEM}},
)
def ready(runtime: RuntimeDep) -> ReadyResponse:
    """200 once lookups can be answered; 503 + Retry-After while the index loads or its store is retried.

    Load balancers and compose or Kubernetes health checks probe this one, so no traffic arrives before
    the first lookup could be served. Open, like ``/health``: it says nothing the 503 of a lookup would not.
    """
    engine = runtime.engine
    if engine is None:
        raise NotReady(runtime.not_ready_detail(), headers={"Retry-After": "2"})
    return ReadyResponse(generation=str(engine.generation))


@router.get(
    "/v1/index/status",
    response_model=IndexStatus,
    summary="What the index holds and how the last run went",
    dependencies=[Depends(require_read_token)],
    responses={401: {"description": "A read token is configured and was not sent", **_PROBLEM}},
)
def index_status(runtime: RuntimeDep) -> IndexStatus:
    """Documents, issues, build and sync times, generation, the last run and the scheduler."""
    scheduler = runtime.scheduler.state() if runtime.scheduler else SchedulerState(enabled=False)
    if runtime.engine is None:
        return IndexStatus(ready=False, scheduler=scheduler)
    status = runtime.engine.index_status()
    info = index_info(status)
    # The scheduler's record covers runs that failed before the store could record them.
    last_run = (runtime.scheduler.last_run if runtime.scheduler else None) or status.last_run
    return IndexStatus(
        ready=True,
        documents=info.documents,
        issues=info.issues,
        built_at=info.built_at,
        github_synced_at=info.github_synced_at,
        generation=status.generation or runtime.engine.generation,
        last_run=last_run,
        scheduler=scheduler,
    )


_ADMIN_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong admin token", **_PROBLEM},
    403: {"description": "Admin endpoints are disabled (GPTOSS_DOCTOR_ADMIN_TOKEN unset)", **_PROBLEM},
    409: {"description": "Another index run is in progress", **_PROBLEM},
    503: {"description": "Still starting", **_PROBLEM},
}


def _start(scheduler: SchedulerDep, kind: RunKind, what: str) -> RunAccepted:
    if not scheduler.trigger(kind):
        raise Busy("Another index run is in progress; see /v1/index/status.")
    return RunAccepted(started=True, kind=kind, detail=f"{what} started; follow it on /v1/index/status.")


@router.post(
    "/v1/index/sync",
    response_model=RunAccepted,
    status_code=202,
    summary="Start a GitHub re-sync now (admin)",
    dependencies=[Depends(require_admin_token)],
    responses=_ADMIN_RESPONSES,
)
def trigger_sync(scheduler: SchedulerDep) -> RunAccepted:
    """Incremental sync of docs, the bundled KB and GitHub, in the background."""
    return _start(scheduler, "sync", "Re-sync")


@router.post(
    "/v1/index/rebuild",
    response_model=RunAccepted,
    status_code=202,
    summary="Rebuild the whole index now (admin)",
    dependencies=[Depends(require_admin_token)],
    responses=_ADMIN_RESPONSES,
)
def trigger_rebuild(
    scheduler: SchedulerDep,
    github: Annotated[
        bool, Query(description="Also re-sync GitHub (needs network); false rebuilds docs + KB offline")
    ] = True,
) -> RunAccepted:
    """Full rebuild (``index --full``, with ``--github`` unless github=false) in the background; the old
    index serves meanwhile, and threads synced earlier are carried over."""
    return _start(scheduler, "rebuild" if github else "rebuild-local", "Rebuild")
