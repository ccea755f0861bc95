"""Profile sets, as the validator reads them: re-exported from :mod:`infercast.cost.profiles`
(where every command resolves its ``--profile``)."""

from infercast.cost.profiles import (  # noqa: F401
    SHIPPED,
    ProfileSet,
    load_profile_set,
    parse_profile_set,
    resolve_profile,
)
