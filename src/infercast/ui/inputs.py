"""The page's forms as validated objects, and the errors that point at one field.

Every check a form needs happens here, before any long work: a bad value raises
:class:`FieldError` naming the form field, so the page can show one clear line
beside it. The specs themselves are loaded by the library's own loaders
(``specs.catalog``, ``specs.hf_config``, ``specs.hardware``).
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infercast.errors import InfercastError, with_flags
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec

CUSTOM = "custom"  # the model / hardware select's value for "pasted below"


class FieldError(InfercastError):
    """A bad input, and the form field it belongs to (None = the form as a whole)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(with_flags(message, {}))  # the page names fields, not flags
        self.field = field


class Form(BaseModel):
    """A page form: unknown keys are ignored (old links keep working), values are checked."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    @classmethod
    def parse(cls, data: Any) -> Form:
        """Validate ``data``; the first problem raises FieldError naming its field."""
        if not isinstance(data, dict):
            raise FieldError("the request body must be a JSON object")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else None
            got = err.get("input")
            shown = "" if isinstance(got, dict | list) or got is None else f" (got {got!r})"
            raise FieldError(f"{field} {_plain(err)}{shown}", field) from None


def _plain(err: dict[str, Any]) -> str:
    """A pydantic error in a person's words."""
    ctx, kind = err.get("ctx") or {}, err["type"]
    words = {
        "greater_than_equal": "must be at least {ge}",
        "greater_than": "must be more than {gt}",
        "less_than_equal": "must be at most {le}",
        "less_than": "must be less than {lt}",
        "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_parsing": "must be a number",
        "int_type": "must be a whole number",
        "float_type": "must be a number",
        "bool_parsing": "must be true or false",
        "missing": "is required",
        "literal_error": "must be one of {expected}",
    }
    if kind in words:
        return words[kind].format(
            **{k: f"{v:g}" if isinstance(v, float) else v for k, v in ctx.items()}
        )
    return err["msg"].removeprefix("Value error, ")


class EstimateForm(Form):
    """The Estimate view's inputs (the flags of ``infercast estimate``)."""

    model: str = "llama-3.1-70b"
    model_config_json: str = ""  # a pasted config.json when model == "custom"
    hardware: str = "h100-sxm"
    hardware_spec: str = ""  # a pasted TOML/JSON part when hardware == "custom"
    weights: str = "fp8"
    compute: str = ""  # "" = the weights' default
    kv_cache: str = "fp8"
    tp: int = Field(1, ge=1, le=1024)
    pp: int = Field(1, ge=1, le=1024)
    ep: int = Field(1, ge=1, le=1024)
    prompt: int = Field(1024, ge=1, le=10_000_000)
    context: int = Field(2048, ge=1, le=10_000_000)
    batch: int = Field(32, ge=1, le=1_000_000)
    profile: str = "shipped"  # every command's default: the validated profile
    engine: str = ""
    price: float | None = Field(None, ge=0)


def _close(name: str, choices: list[str]) -> str:
    """' (did you mean ...?)' as the catalog words it, or ''."""
    from infercast.specs.catalog import _suggest

    return _suggest(name.lower(), choices)


def load_model_input(name: str, pasted: str) -> ModelSpec:
    """A preset name, or a pasted Hugging Face config.json (``name == "custom"``)."""
    from infercast.specs.catalog import load_model, model_names
    from infercast.specs.hf_reader import model_from_hf_config

    if name == CUSTOM:
        if not pasted.strip():
            raise FieldError(
                "paste a Hugging Face config.json, or pick a preset", "model_config_json"
            )
        try:
            cfg = json.loads(pasted)
        except json.JSONDecodeError as exc:
            raise FieldError(
                f"config.json is not valid JSON: {exc.msg} at line {exc.lineno}",
                "model_config_json",
            ) from None
        if not isinstance(cfg, dict):
            raise FieldError("config.json must be a JSON object", "model_config_json")
        try:
            return model_from_hf_config(cfg, str(cfg.get("_name_or_path") or "custom"))
        except InfercastError as exc:
            raise FieldError(f"config.json: {exc}", "model_config_json") from None
    if name not in model_names():  # a path on the server's disk is not the page's business
        raise FieldError(
            f"unknown model {name!r}{_close(name, model_names())}: pick a preset or paste "
            "a config.json",
            "model",
        )
    return load_model(name)


def load_hardware_input(key: str, pasted: str) -> HardwareSpec:
    """A preset key, or a pasted TOML/JSON part (``key == "custom"``)."""
    from infercast.specs.catalog import hardware_names, load_hardware
    from infercast.specs.hardware import hardware_from_mapping

    if key == CUSTOM:
        text = pasted.strip()
        if not text:
            raise FieldError(
                "paste a hardware spec (TOML or JSON), or pick a preset", "hardware_spec"
            )
        try:
            data = json.loads(text) if text.startswith("{") else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise FieldError(
                f"the hardware spec is not valid TOML/JSON: {exc}", "hardware_spec"
            ) from None
        try:
            return hardware_from_mapping(data, where="the pasted spec")
        except InfercastError as exc:
            raise FieldError(str(exc), "hardware_spec") from None
    if key.lower() not in hardware_names():
        raise FieldError(
            f"unknown part {key!r}{_close(key, hardware_names())}: pick a preset "
            "(infercast hardware) or paste a spec",
            "hardware",
        )
    return load_hardware(key)


def check_dtype(value: str, field: str, allow: tuple[str, ...] = ()) -> str:
    """A dtype the precision parser accepts (or one of ``allow``), else FieldError on ``field``."""
    from infercast.specs.precision import normalize_dtype

    if value in allow:
        return value
    try:
        return normalize_dtype(value, f"{field} dtype")
    except InfercastError as exc:
        raise FieldError(str(exc), field) from None


def profile_for(profile: str, engine: str, hardware_key: str):
    """The efficiency profile ``--profile`` / ``--engine`` select (cost.profiles.resolve_profile):
    an engine preset (``specs.engines``) picks its profile group."""
    from infercast.cost.profiles import resolve_profile
    from infercast.specs.engines import load_engine

    if profile not in ("builtin", "shipped"):
        raise FieldError(f"profile {profile!r}: choose builtin or shipped", "profile")
    group = None
    if engine:
        try:
            group = load_engine(engine).profile_group
        except InfercastError as exc:
            raise FieldError(str(exc), "engine") from None
    try:
        return resolve_profile(profile, hardware_key, group)
    except InfercastError as exc:
        raise FieldError(str(exc), "profile") from None
