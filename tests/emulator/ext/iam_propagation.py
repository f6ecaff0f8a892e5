"""IAM instance profile propagation delay, as EC2 RunInstances sees it.

An instance profile is not usable by EC2 at once: RunInstances naming a profile created moments
ago fails with HTTP 400 ``InvalidParameterValue`` "Value (<name>) for parameter
iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name" until IAM's change has
propagated (aws/karpenter-provider-aws#5018, hashicorp/packer#9810; IAM User Guide,
"Troubleshoot IAM": changes are eventually consistent). Callers are expected to retry.

Here: RunInstances with ``IamInstanceProfile.Name`` or ``.Arn`` naming a profile of the account
created less than ``seconds`` ago (default 3) fails ONCE per profile with that error (the message
names the profile's name and ``iamInstanceProfile.name`` whichever way it was given; AWS's
wording for the ARN form was not verified); the next call goes through. An unknown profile is
left to moto.

Control endpoint (JSON; global; ``POST /moto-api/reset`` restores the default and forgets which
profiles already failed): ``POST /_gpustack/iam-propagation?seconds=N`` (a number >= 0; 0 turns
it off) answers ``{"seconds": N}``; ``GET`` answers the setting.
"""

from __future__ import annotations

from typing import Any, Callable

from moto.core.utils import utcnow
from moto.iam.models import iam_backends
from moto.utilities.utils import get_partition

from ._ec2 import LOCK, EC2Response, ec2_action, ec2_error
from .capacity_control import ControlError, float_arg, on_reset, route

DEFAULT_SECONDS = 3.0
_settings = {"seconds": DEFAULT_SECONDS}
_failed: set[tuple[str, str]] = set()  # (account, profile ARN) that already failed once


@route("POST", "/_gpustack/iam-propagation")
def _set(query: dict[str, str]) -> tuple[int, Any]:
    seconds = float_arg(query, "seconds")
    if seconds < 0:
        raise ControlError("seconds must be >= 0")
    with LOCK:
        _settings["seconds"] = seconds
    return 200, dict(_settings)


@route("GET", "/_gpustack/iam-propagation")
def _get(query: dict[str, str]) -> tuple[int, Any]:
    return 200, dict(_settings)


def _reset() -> None:
    with LOCK:
        _settings["seconds"] = DEFAULT_SECONDS
        _failed.clear()


def _profile(account: str, region: str, name: str | None, arn: str | None) -> Any | None:
    backend = iam_backends[account][get_partition(region)]
    for profile in backend.get_instance_profiles():
        if (name and profile.name == name) or (arn and profile.arn == arn):
            return profile
    return None


_orig_run_instances: Callable[[EC2Response], Any] = EC2Response.run_instances


def _run_instances(self: EC2Response) -> Any:
    name = self._get_param("IamInstanceProfile.Name")
    arn = self._get_param("IamInstanceProfile.Arn")
    seconds = _settings["seconds"]
    if (name or arn) and seconds > 0:
        with LOCK:
            profile = _profile(self.current_account, self.region, name, arn)
            if profile is not None:
                key = (self.current_account, profile.arn)
                young = (utcnow() - profile.create_date).total_seconds() < seconds
                if young and key not in _failed:
                    _failed.add(key)
                    raise ec2_error(
                        "InvalidParameterValue",
                        f"Value ({profile.name}) for parameter iamInstanceProfile.name is invalid. "
                        "Invalid IAM Instance Profile name",
                    )
    return _orig_run_instances(self)


def install() -> None:
    ec2_action("RunInstances", override=True)(_run_instances)
    on_reset(_reset)
