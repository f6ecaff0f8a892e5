"""EC2 launch templates: fixes to moto 5.2.5 so that what is stored is what is read back.

moto round-trips ``LaunchTemplateData`` field for field (network interfaces with
``NetworkCardIndex``/``InterfaceType`` efa and efa-only, block devices, market options,
capacity reservation, metadata options, placement, user data, tag specifications), and
ModifyLaunchTemplate and DescribeLaunchTemplateVersions (``$Latest``, ``$Default``, numbers) work.
What it gets wrong, and this fixes:

* CreateLaunchTemplate copies the template's own tags (``TagSpecifications`` of type
  ``launch-template``) into ``LaunchTemplateData.TagSpecifications``, so the data read back is not
  the data sent. Here they only tag the template.
* The template's ``Tags`` are a copy taken at creation: CreateTags/DeleteTags on the ``lt-`` id
  never show in DescribeLaunchTemplates or ModifyLaunchTemplate. Here they are read live.
* CreateLaunchTemplateVersion keeps ``UserData`` as a plain string, which RunInstances from that
  version chokes on (500), and ignores ``SourceVersion``. Here user data is stored as for
  CreateLaunchTemplate, and the new version starts from the source version's data (top-level
  fields given replace the source's).
* DescribeLaunchTemplates returns at most 15 templates and never a ``NextToken``; an unknown id
  is silently skipped. Here ``MaxResults``/``NextToken`` page (all at once without
  ``MaxResults``) and an unknown id is ``InvalidLaunchTemplateId.NotFound``, as in EC2.
* DeleteLaunchTemplate by an unknown id answers ``InvalidLaunchTemplateName.NotFoundException``;
  EC2 answers ``InvalidLaunchTemplateId.NotFound``. The template's tags are dropped with it.
* Version ``0`` or a negative one reads the newest version; it is
  ``InvalidLaunchTemplateId.VersionNotFound``.
"""

from __future__ import annotations

from typing import Any

from moto.ec2.exceptions import (
    InvalidLaunchTemplateIdNotFound,
    InvalidLaunchTemplateVersionNotFound,
    MissingParameterError,
)
from moto.ec2.models.launch_templates import LaunchTemplate, LaunchTemplateBackend
from moto.ec2.utils import parse_user_data

from ._ec2 import LOCK, ActionResult, EC2Response, backend_for, ec2_action, tag_list

MAX_RESULTS = 200


def _template_shape(response: EC2Response, template: LaunchTemplate) -> dict[str, Any]:
    """The botocore ``LaunchTemplate`` shape."""
    return {
        "CreateTime": template.create_time,
        "CreatedBy": f"arn:{response.partition}:iam::{response.current_account}:root",
        "DefaultVersionNumber": template.default_version_number,
        "LatestVersionNumber": template.latest_version_number,
        "LaunchTemplateId": template.id,
        "LaunchTemplateName": template.name,
        "Tags": tag_list(template),
    }


def _data(response: EC2Response) -> dict[str, Any]:
    data = response._get_param("LaunchTemplateData", {}) or {}
    if "UserData" in data:
        data["UserData"] = parse_user_data(data["UserData"])
    return data


def _create(self: EC2Response) -> ActionResult:
    name = self._get_param("LaunchTemplateName")
    description = self._get_param("VersionDescription")
    tag_spec = self._parse_tag_specification()
    data = _data(self)
    self.error_on_dryrun()
    with LOCK:
        template = backend_for(self).create_launch_template(name, description, data, tag_spec)
    return ActionResult({"LaunchTemplate": _template_shape(self, template)})


def _create_version(self: EC2Response) -> ActionResult:
    name = self._get_param("LaunchTemplateName")
    template_id = self._get_param("LaunchTemplateId")
    source = self._get_param("SourceVersion")
    description = self._get_param("VersionDescription")
    data = _data(self)
    self.error_on_dryrun()
    backend = backend_for(self)
    with LOCK:
        if template_id:
            template = backend.get_launch_template(template_id)
        elif name:
            template = backend.get_launch_template_by_name(name)
        else:
            raise MissingParameterError("launch template ID or launch template name")
        if source is not None:
            data = {**template.get_version(source).data, **data}
        version = template.create_version(data, description)
    return ActionResult(
        {
            "LaunchTemplateVersion": {
                "CreateTime": version.create_time,
                "CreatedBy": f"arn:{self.partition}:iam::{self.current_account}:root",
                "DefaultVersion": template.is_default(version),
                "LaunchTemplateData": version.data,
                "LaunchTemplateId": template.id,
                "LaunchTemplateName": template.name,
                "VersionDescription": version.description,
                "VersionNumber": version.number,
            }
        }
    )


def _describe(self: EC2Response) -> ActionResult:
    names = self._get_param("LaunchTemplateNames", []) or []
    ids = self._get_param("LaunchTemplateIds", []) or []
    max_results = self._get_int_param("MaxResults")
    start = int(self._get_param("NextToken") or 0)
    filters = self._filters_from_querystring()
    self.error_on_dryrun()
    with LOCK:
        templates = backend_for(self).describe_launch_templates(
            template_names=names, template_ids=ids, filters=filters
        )
    end = len(templates) if max_results is None else start + max(1, min(max_results, MAX_RESULTS))
    result: dict[str, Any] = {"LaunchTemplates": [_template_shape(self, t) for t in templates[start:end]]}
    if end < len(templates):
        result["NextToken"] = str(end)
    return ActionResult(result)


_orig_describe_launch_templates = LaunchTemplateBackend.describe_launch_templates


def _describe_launch_templates(
    self: Any,
    template_names: list[str] | None = None,
    template_ids: list[str] | None = None,
    filters: Any = None,
) -> list[LaunchTemplate]:
    for template_id in template_ids or []:
        if template_id not in self.launch_templates:
            raise InvalidLaunchTemplateIdNotFound(template_id)
    return _orig_describe_launch_templates(self, template_names, template_ids, filters)


_orig_delete_launch_template = LaunchTemplateBackend.delete_launch_template


def _delete_launch_template(self: Any, name: str, tid: str | None) -> LaunchTemplate:
    if not name and tid and tid not in self.launch_templates:
        raise InvalidLaunchTemplateIdNotFound(tid)
    template = _orig_delete_launch_template(self, name, tid)
    self.tags.pop(template.id, None)
    return template


_orig_get_version = LaunchTemplate.get_version


def _get_version(self: LaunchTemplate, num: Any) -> Any:
    if str(num).lower() not in ("$latest", "$default") and not (
        str(num).isdigit() and 1 <= int(num) <= len(self.versions)
    ):
        raise InvalidLaunchTemplateVersionNotFound(template_id=self.id, version=num)
    return _orig_get_version(self, num)


def _ignore_tags(template: LaunchTemplate, value: Any) -> None:
    """moto's constructor stores a copy of the tags; they are read live instead."""


def install() -> None:
    ec2_action("CreateLaunchTemplate", override=True)(_create)
    ec2_action("CreateLaunchTemplateVersion", override=True)(_create_version)
    ec2_action("DescribeLaunchTemplates", override=True)(_describe)
    LaunchTemplate.tags = property(tag_list, _ignore_tags)  # type: ignore[assignment]
    LaunchTemplate.get_version = _get_version  # type: ignore[method-assign]
    LaunchTemplateBackend.describe_launch_templates = _describe_launch_templates  # type: ignore[method-assign]
    LaunchTemplateBackend.delete_launch_template = _delete_launch_template  # type: ignore[method-assign]
