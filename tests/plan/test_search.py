"""plan's reason a runner-up lost, for each way the ranking breaks a tie (search._rank)."""

from types import SimpleNamespace

from infercast.plan.search import Option, why_not
from infercast.plan.space import Candidate


def _option(miss: float = 0.5, gpus: int = 1, **cand) -> Option:
    point = SimpleNamespace(num_gpus=gpus, miss=miss, joules_per_output_token=0.1)
    return Option(Candidate("h100-sxm", 1, "bf16", "bf16", **cand), point, 2.0)


def test_why_not_names_each_tie_break_of_the_ranking():
    best = _option()
    assert why_not(_option(gpus=2), best).startswith("$2.00/h more")
    assert "less SLO headroom" in why_not(_option(miss=0.9), best)
    assert "speculative" in why_not(_option(speculative=True), best)
    assert "disaggregated" in why_not(_option(disagg=(1, 1)), best)
    # a runner-up that differs only in its batch cap is a tie, not "a more complex setup"
    tie = why_not(_option(max_num_seqs=64), best)
    assert tie.startswith("same $/h and headroom: a tie") and "max_num_seqs 64 vs" in tie
    assert "complex" not in tie
