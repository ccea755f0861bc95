"""The ``infercast ui`` server: the page's static files and a small JSON API over the library.

Routes: ``/`` (the page), ``/static/*`` (its files, vendored chart library
included: nothing from a CDN), ``/api/options`` (presets for the selects),
``/api/estimate`` and ``/api/compare`` (answered at once), ``/api/simulate`` and
``/api/plan`` (background jobs, polled at ``/api/jobs/{id}``), ``/api/validation``
and ``/api/validation/row/{id}`` (computed once per server start).

Every error is a JSON body ``{"error": one line, "field": the form field or
null}``: 400 for a bad input, 404 for an unknown job, 500 for a bug (its type and
message, never a traceback); the server keeps serving either way.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from infercast.errors import InfercastError
from infercast.ui.estimate_view import CurveCache
from infercast.ui.inputs import EstimateForm, FieldError
from infercast.ui.jobs import Jobs
from infercast.ui.validation_view import ValidationStore

STATIC = Path(__file__).parent / "static"


def _engine_names() -> list[str]:
    """The engine presets' names (``infercast engines``), for the page's engine field."""
    from infercast.specs.engines import preset_names

    return preset_names()


def _json(data: Any, status: int = 200) -> JSONResponse:
    from infercast.report.jsonsafe import json_safe

    return JSONResponse(json_safe(data), status_code=status)


def _error(message: str, field: str | None = None, status: int = 400) -> JSONResponse:
    from infercast.errors import with_flags

    return JSONResponse({"error": with_flags(message, {}), "field": field}, status_code=status)


async def _body(request: Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        raise FieldError("the request body is not valid JSON") from None


def options() -> dict[str, Any]:
    """Presets and choices for the page's selects."""
    from infercast.specs.catalog import hardware_names, load_hardware, model_names
    from infercast.specs.precision import DTYPE_BYTES

    parts = []
    for key in hardware_names():
        h = load_hardware(key)
        parts.append(
            {
                "key": key,
                "name": h.name,
                "memory_bytes": h.memory_bytes,
                "memory_bandwidth_bytes_per_s": h.memory_bandwidth_bytes_per_s,
                "price_per_hour": h.price_per_hour,
            }
        )
    return {
        "models": model_names(),
        "hardware": parts,
        "dtypes": list(DTYPE_BYTES),
        "engines": _engine_names(),
        "traces": ["azure-conv", "azure-code"],
        "schedulers": ["chunked", "continuous", "static"],
        "defaults": {"estimate": EstimateForm().model_dump()},
    }


def create_app(validate_on_start: bool = True, validation_data: str | None = None) -> FastAPI:
    """The page's app; ``validate_on_start`` begins the validation run (over ``validation_data``,
    a measurement CSV, default the shipped set) at startup."""
    jobs = Jobs()
    store = ValidationStore(validation_data)
    curves = CurveCache()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if validate_on_start:
            store.start()
        yield
        store.stop()

    # no /docs: FastAPI's Swagger page loads from a CDN, and the page must work offline
    app = FastAPI(
        title="infercast ui", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    app.state.jobs, app.state.validation = jobs, store

    @app.exception_handler(InfercastError)
    async def _bad_input(request: Request, exc: InfercastError) -> JSONResponse:
        return _error(str(exc), getattr(exc, "field", None))

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        return _error(f"internal error ({type(exc).__name__}): {exc}", status=500)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    @app.get("/api/options")
    def get_options() -> JSONResponse:
        return _json(options())

    @app.post("/api/estimate")
    async def post_estimate(request: Request) -> JSONResponse:
        from infercast.ui.estimate_view import estimate_payload

        return _json(estimate_payload(EstimateForm.parse(await _body(request)), curves))

    @app.post("/api/compare")
    async def post_compare(request: Request) -> JSONResponse:
        from infercast.ui.compare_view import compare_payload

        return _json(compare_payload(await _body(request), curves))

    @app.post("/api/simulate")
    async def post_simulate(request: Request) -> JSONResponse:
        from infercast.ui import simulate_view as sv

        form = sv.SimulateForm.parse(await _body(request))
        cfg, timer = sv.prepare(form)  # bad input fails here, before the job starts
        job = jobs.start("simulate", lambda progress: sv.run(form, cfg, timer, progress))
        return _json(job.to_dict(), 202)

    @app.post("/api/plan")
    async def post_plan(request: Request) -> JSONResponse:
        from infercast.ui import plan_view as pv

        form = pv.PlanForm.parse(await _body(request))
        req = pv.build_request(form)
        job = jobs.start("plan", lambda progress: pv.run(form, req, progress))
        return _json(job.to_dict(), 202)

    @app.get("/api/jobs/{job_id}")
    def get_job(job_id: str) -> JSONResponse:
        job = jobs.get(job_id)
        if job is None:
            return _error(
                f"no job {job_id!r} (finished jobs are kept for a while only)", status=404
            )
        return _json(job.to_dict())

    @app.get("/api/validation")
    def get_validation() -> JSONResponse:
        store.start()
        return _json(store.status())

    @app.get("/api/validation/row/{row_id}")
    def get_validation_row(row_id: str) -> JSONResponse:
        return _json(store.row(row_id))

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
