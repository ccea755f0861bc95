"""Exception tree of infercast.

Every error a user can cause by what they type or the files they pass is an
``InfercastError``; the CLI prints its message on one line and exits with
code 2. Anything else is a bug and keeps its traceback.

Library messages name the parameter they are about in backticks ("`ep` 4 exceeds the GPUs of
a replica"); the command line shows each such name as its flag (:func:`with_flags`), so the
library never speaks of flags and the user still reads the one they typed.

    InfercastError
    +-- ConfigError            bad user input: flags, config files, values
    |   +-- UnknownModelError      a model name that is neither a preset nor a path
    |   +-- ModelConfigError       a config.json that is malformed or misses a field
    |   +-- UnknownHardwareError   a part that is neither a preset nor a spec file
    |   +-- UnknownDtypeError      a precision name infercast does not know
    +-- DoesNotFitError        a configuration that does not fit in memory
    +-- DataError              a measurement/trace file that cannot be read
    +-- Unpredictable          a setup the models cannot predict yet (the message says why)
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_PARAM = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


def with_flags(message: str, flags: Mapping[str, str]) -> str:
    """``message`` with each `parameter` it names written as ``flags[parameter]`` (e.g. the
    command line's ``--ep``), or as the bare name where ``flags`` has none."""
    return _PARAM.sub(lambda m: flags.get(m.group(1), m.group(1)), message)


class InfercastError(Exception):
    """Base of every error caused by user input; its message is one line."""


class ConfigError(InfercastError, ValueError):
    """A flag, config value or file is invalid; the message names it and the fix."""


class UnknownModelError(ConfigError):
    """A model name that is neither a shipped preset nor a config path."""


class ModelConfigError(ConfigError):
    """A model config.json that is malformed, unsupported or misses a field."""


class UnknownHardwareError(ConfigError):
    """A hardware name that is neither a shipped preset nor a spec file."""


class UnknownDtypeError(ConfigError):
    """A precision name infercast does not know."""


class DoesNotFitError(InfercastError):
    """A configuration whose weights and KV cache do not fit in device memory."""


class DataError(InfercastError):
    """A data file (measurements, trace) that cannot be read as documented."""


class Unpredictable(InfercastError):
    """A setup (e.g. a measurement row) infercast cannot predict yet; the message is the reason."""
