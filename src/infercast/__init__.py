"""infercast: how fast and how expensive LLM inference will be, and why.

The curated public API (everything else is internal and may move):

    estimate(EstimateRequest(...))  roofline estimate of prefill and decode -> Estimate
    StepModel                cost of one forward step (floor, expected, itemised)
    StepCost                 one step's ops with their times, and the totals
    load_model, load_hardware
    ModelSpec, HardwareSpec, Precision, Parallelism, EfficiencyProfile
    load_profile             an EfficiencyProfile from a profile TOML (None: the defaults)
    InfercastError           base class of every error the library raises
"""

from infercast.cost.efficiency import EfficiencyProfile, load_profile
from infercast.cost.step import StepCost, StepModel
from infercast.errors import InfercastError
from infercast.estimate import Estimate, EstimateRequest, estimate
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision

__version__ = "0.1.0"

__all__ = [
    "EfficiencyProfile",
    "Estimate",
    "EstimateRequest",
    "HardwareSpec",
    "InfercastError",
    "ModelSpec",
    "Parallelism",
    "Precision",
    "StepCost",
    "StepModel",
    "estimate",
    "load_hardware",
    "load_model",
    "load_profile",
]
