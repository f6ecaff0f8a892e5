"""SQS as strict as AWS for the calls gpustack makes (CreateQueue, GetQueueUrl,
GetQueueAttributes, SetQueueAttributes, DeleteQueue, ListQueues, ListQueueTags, TagQueue).

moto 5.2.5 already serves SQS over the JSON protocol (awsJson1_0 with ``awsQueryCompatible``: the
``x-amzn-query-error`` header), which botocore 1.44.5 and the Rust ``aws-sdk-sqs`` speak, and
already has: queue-name rules (1-80 of ``[A-Za-z0-9_-]``, ``.fifo`` for FIFO queues),
``QueueAlreadyExists`` for a CreateQueue whose attributes differ from the existing queue's,
``AWS.SimpleQueueService.NonExistentQueue`` for unknown queues, ``InvalidAttributeName`` for unknown
names in GetQueueAttributes, tags on create, ListQueues with ``QueueNamePrefix`` and
``MaxResults``/``NextToken``, ListQueueTags/TagQueue/UntagQueue. This module adds what it lacks.

Sources: [API] the botocore model's documentation of ``CreateQueueRequest.Attributes``,
``SetQueueAttributesRequest.Attributes``, CreateQueue, DeleteQueue and the ``QueueDeletedRecently``
error (sqs 2012-11-05, botocore 1.44.5); public reports of SQS's answers, named where used.

* Attribute names (CreateQueue, SetQueueAttributes): only the ones [API] lists as settable.
  Another name, ``All``, a read-only attribute (``QueueArn``, ``ApproximateNumberOfMessages``,
  ...), a FIFO-only attribute (``ContentBasedDeduplication``, ``DeduplicationScope``,
  ``FifoThroughputLimit``) on a standard queue, ``FifoQueue`` other than ``true`` at creation
  (crossplane-contrib/provider-aws#457: ``FifoQueue=false`` is "InvalidAttributeName: Unknown
  Attribute FifoQueue.") or ``FifoQueue`` in SetQueueAttributes ("You can provide this attribute
  only during queue creation" [API]): ``InvalidAttributeName`` "Unknown Attribute <name>." (the
  wording SQS uses, aws/aws-sdk-ruby#1632, CoorpAcademy/serverless-plugins#225).
* Attribute values [API]: ``DelaySeconds`` 0-900, ``MaximumMessageSize`` 1,024-1,048,576,
  ``MessageRetentionPeriod`` 60-1,209,600, ``ReceiveMessageWaitTimeSeconds`` 0-20,
  ``VisibilityTimeout`` 0-43,200, ``KmsDataKeyReusePeriodSeconds`` 60-86,400 (decimal integers);
  ``SqsManagedSseEnabled``, ``ContentBasedDeduplication`` ``true``/``false``; ``DeduplicationScope``
  ``messageGroup``/``queue``; ``FifoThroughputLimit`` ``perQueue``/``perMessageGroupId`` (the latter
  only with ``DeduplicationScope=messageGroup``); ``Policy`` "A valid AWS policy" (a JSON object with
  ``Statement``; ``""`` in SetQueueAttributes removes it), ``RedrivePolicy``/``RedriveAllowPolicy``
  JSON objects; ``KmsMasterKeyId`` non-empty; SSE-KMS and SSE-SQS together ("Only one server-side
  encryption option is supported per queue" [API]). Else ``InvalidAttributeValue`` "Invalid value
  for the parameter <name>." (moto's wording for MaximumMessageSize; the exact SQS text for the
  others is unverified). moto answered 500 for a non-integer and accepted the rest.
* A standard queue's name cannot end ``.fifo`` ("A FIFO queue name must end with the .fifo
  suffix"; ``.`` is otherwise not a valid name character [API]): ``InvalidParameterValue``.
* SetQueueAttributes changes only the attributes it names: moto's dropped the queue ``Policy``
  whenever the request did not carry one (``Queue._set_attributes``).
* CreateQueue of a name deleted less than 60 s ago: ``QueueDeletedRecently`` "You must wait 60
  seconds after deleting a queue before you can create another queue with the same name." [API
  CreateQueue, DeleteQueue, the error's doc]. The window is ``POST
  /_gpustack/sqs?deleted_recently_seconds=N`` (default 60; 0 turns it off; ``GET`` reads;
  ``POST /moto-api/reset`` restores 60 and forgets deletions).
"""

from __future__ import annotations

import json
import time
from typing import Any

from moto.core.responses import ActionResult
from moto.sqs.exceptions import InvalidAttributeName, InvalidAttributeValue, SQSException
from moto.sqs.exceptions import InvalidParameterValue as SQSInvalidParameterValue
from moto.sqs.models import SQSBackend
from moto.sqs.responses import SQSResponse

from ._ec2 import LOCK
from .capacity_control import ControlError, float_arg, on_reset, route

INT_RANGES = {
    "DelaySeconds": (0, 900),
    "MaximumMessageSize": (1024, 1048576),
    "MessageRetentionPeriod": (60, 1209600),
    "ReceiveMessageWaitTimeSeconds": (0, 20),
    "VisibilityTimeout": (0, 43200),
    "KmsDataKeyReusePeriodSeconds": (60, 86400),
}
BOOLEANS = ("SqsManagedSseEnabled", "ContentBasedDeduplication")
ENUMS = {
    "DeduplicationScope": ("messageGroup", "queue"),
    "FifoThroughputLimit": ("perQueue", "perMessageGroupId"),
}
JSON_OBJECTS = ("Policy", "RedrivePolicy", "RedriveAllowPolicy")
FIFO_ONLY = ("ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit")
SETTABLE = (*INT_RANGES, *BOOLEANS, *ENUMS, *JSON_OBJECTS, "KmsMasterKeyId")
DEFAULT_DELETED_RECENTLY_SECONDS = 60.0

_settings = {"deleted_recently_seconds": DEFAULT_DELETED_RECENTLY_SECONDS}
_deleted: dict[tuple[str, str, str], float] = {}  # (account, region, name) -> time.monotonic()


class QueueDeletedRecently(SQSException):
    def __init__(self) -> None:
        super().__init__(
            "AWS.SimpleQueueService.QueueDeletedRecently",
            "You must wait 60 seconds after deleting a queue before you can create another queue "
            "with the same name.",
        )


@route("POST", "/_gpustack/sqs")
def _set(query: dict[str, str]) -> tuple[int, Any]:
    for name in query:
        if name not in _settings:
            raise ControlError(f"unknown setting {name!r}; known: {', '.join(_settings)}")
    if "deleted_recently_seconds" in query:
        seconds = float_arg(query, "deleted_recently_seconds")
        if seconds < 0:
            raise ControlError("deleted_recently_seconds must be >= 0")
        with LOCK:
            _settings["deleted_recently_seconds"] = seconds
    return 200, dict(_settings)


@route("GET", "/_gpustack/sqs")
def _get(query: dict[str, str]) -> tuple[int, Any]:
    return 200, dict(_settings)


def _reset() -> None:
    with LOCK:
        _settings["deleted_recently_seconds"] = DEFAULT_DELETED_RECENTLY_SECONDS
        _deleted.clear()


def _json_object(value: str, name: str, policy: bool) -> None:
    try:
        document = json.loads(value)
    except ValueError:
        raise InvalidAttributeValue(name) from None
    if not isinstance(document, dict) or (policy and not document.get("Statement")):
        raise InvalidAttributeValue(name)


def check_attributes(attributes: dict[str, Any], fifo: bool, creating: bool) -> None:
    """Raises SQS's error for the first attribute AWS would refuse."""
    for name, value in attributes.items():
        if creating and name == "FifoQueue":
            if str(value) != "true":
                raise InvalidAttributeName(name)
            continue
        if name not in SETTABLE or (name in FIFO_ONLY and not fifo):
            raise InvalidAttributeName(name)
        value = str(value)
        if name in INT_RANGES:
            low, high = INT_RANGES[name]
            if not value.isdigit() or not low <= int(value) <= high:
                raise InvalidAttributeValue(name)
        elif name in BOOLEANS and value not in ("true", "false"):
            raise InvalidAttributeValue(name)
        elif name in ENUMS and value not in ENUMS[name]:
            raise InvalidAttributeValue(name)
        elif name in JSON_OBJECTS and value != "":
            _json_object(value, name, name == "Policy")
        elif name == "KmsMasterKeyId" and not value:
            raise InvalidAttributeValue(name)
    if attributes.get("FifoThroughputLimit") == "perMessageGroupId" and attributes.get(
        "DeduplicationScope"
    ) != "messageGroup":
        raise InvalidAttributeValue("FifoThroughputLimit")
    if attributes.get("KmsMasterKeyId") and str(attributes.get("SqsManagedSseEnabled")) == "true":
        raise InvalidAttributeValue("SqsManagedSseEnabled")


_orig_create_queue = SQSResponse.create_queue
_orig_set_queue_attributes = SQSResponse.set_queue_attributes
_orig_delete_queue = SQSResponse.delete_queue
_orig_backend_set = SQSBackend.set_queue_attributes


def _create_queue(self: SQSResponse) -> ActionResult:
    name = self._get_param("QueueName")
    attributes = self._get_param("Attributes", {}) or {}
    check_attributes(attributes, str(attributes.get("FifoQueue")) == "true", creating=True)
    if isinstance(name, str) and name.endswith(".fifo") and str(attributes.get("FifoQueue")) != "true":
        raise SQSInvalidParameterValue(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
        )
    key = (self.current_account, self.region, name)
    with LOCK:
        deleted_at = _deleted.get(key)
        window = _settings["deleted_recently_seconds"]
        exists = name in self.sqs_backend.queues
    if deleted_at is not None and not exists and time.monotonic() - deleted_at < window:
        raise QueueDeletedRecently()
    return _orig_create_queue(self)


def _set_queue_attributes(self: SQSResponse) -> ActionResult:
    attributes = self._get_param("Attributes", {}) or {}
    queue = self.sqs_backend.get_queue(self._get_queue_name())
    check_attributes(attributes, bool(queue.fifo_queue), creating=False)
    return _orig_set_queue_attributes(self)


def _backend_set_queue_attributes(self: SQSBackend, queue_name: str, attributes: dict[str, Any]) -> Any:
    queue = self.get_queue(queue_name)
    policy = queue.policy
    result = _orig_backend_set(self, queue_name, attributes)
    if "Policy" not in attributes:
        queue.policy = policy  # moto's _set_attributes sets it from the request, None if absent
    return result


def _delete_queue(self: SQSResponse) -> ActionResult:
    name = self._get_queue_name()
    result = _orig_delete_queue(self)
    with LOCK:
        _deleted[(self.current_account, self.region, name)] = time.monotonic()
    return result


def install() -> None:
    SQSResponse.create_queue = _create_queue  # type: ignore[method-assign]
    SQSResponse.set_queue_attributes = _set_queue_attributes  # type: ignore[method-assign]
    SQSResponse.delete_queue = _delete_queue  # type: ignore[method-assign]
    SQSBackend.set_queue_attributes = _backend_set_queue_attributes  # type: ignore[method-assign]
    on_reset(_reset)
