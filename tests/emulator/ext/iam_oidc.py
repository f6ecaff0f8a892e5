"""IAM OpenID Connect providers, as strict as IAM for the calls ``oidc_provider`` makes (moto
5.2.5 has Create/Get/List/Delete/UpdateThumbprint/Tag/Untag but not
AddClientIDToOpenIDConnectProvider or RemoveClientIDFromOpenIDConnectProvider, and accepts any
URL with a scheme).

Sources: botocore iam 2010-05-08 (1.44.5) ``CreateOpenIDConnectProviderRequest``: "The URL must
begin with ``https://`` ... query parameters are not [allowed] ... The URL should not contain a
port number"; "You cannot register the same provider multiple times in a single Amazon Web
Services account"; ``ThumbprintList`` is optional ("If it is not included, IAM will retrieve and
use the top intermediate certificate authority (CA) thumbprint"): the emulator then records a
thumbprint of its own, so a client that compares what it sent with what IAM answers learns
that IAM fills one in. ``clientIDType`` is 1..255 characters (param_validation.py checks
lengths); at most 100 client ids ("You cannot register more than 100 client IDs with a single
IAM OIDC provider", ``ClientIDList``).

* Create with a URL that is not ``https://host[/path]`` (a query, fragment or port included):
  ``ValidationError`` (wording unverified).
* Create of a URL the account has: ``EntityAlreadyExists`` "Provider with url <url> already
  exists." (wording unverified; moto answers "Unknown").
* AddClientIDToOpenIDConnectProvider: adds the id ("If the client ID already exists, the action
  has no effect", botocore operation doc); past 100: ``LimitExceeded``.
* RemoveClientIDFromOpenIDConnectProvider: removes it; "This operation is idempotent; it does
  not fail or return an error if you try to remove a client ID that does not exist"
  (botocore operation doc).
* Unknown ARN: ``NoSuchEntity`` (moto's ``NotFoundException`` answers a 404 ``NoSuchEntity``).
"""

from __future__ import annotations

from typing import Any
from urllib import parse

from moto.iam.exceptions import EntityAlreadyExists, LimitExceededException, ValidationError
from moto.iam.models import IAMBackend
from moto.core.responses import EmptyResult
from moto.iam.responses import IamResponse

CLIENT_IDS_MAX = 100
# What IAM records when no thumbprint is sent: a placeholder of the right shape (40 hex).
FETCHED_THUMBPRINT = "9e99a48a9960b14926bb7f3b02e22da2b0ab7280"

_orig_create = IAMBackend.create_open_id_connect_provider


def check_url(url: Any) -> None:
    parsed = parse.urlsplit(url if isinstance(url, str) else "")
    if (
        parsed.scheme != "https"
        or not parsed.hostname
        or parsed.port is not None
        or parsed.query
        or parsed.fragment
        or not url.startswith("https://")
    ):
        raise ValidationError(f"Invalid Open ID Connect Provider URL: {url}; it must begin with https:// and name no port or query")


def _create(self: IAMBackend, url: str, thumbprint_list: list[str], client_id_list: list[str], tags: Any) -> Any:
    check_url(url)
    host_path = url[len("https://") :].rstrip("/")
    if any(arn.endswith(f":oidc-provider/{host_path}") for arn in self.open_id_providers):
        raise EntityAlreadyExists(f"Provider with url {url} already exists.")
    return _orig_create(self, url, list(thumbprint_list or []) or [FETCHED_THUMBPRINT], client_id_list, tags)


def _add_client_id(self: IamResponse) -> Any:
    provider = self.backend.get_open_id_connect_provider(self._get_param("OpenIDConnectProviderArn"))
    client_id = self._get_param("ClientID")
    if client_id not in provider.client_id_list:
        if len(provider.client_id_list) >= CLIENT_IDS_MAX:
            raise LimitExceededException(f"Cannot exceed quota for ClientIdsPerOpenIdConnectProvider: {CLIENT_IDS_MAX}")
        provider.client_id_list.append(client_id)
    return EmptyResult()


def _remove_client_id(self: IamResponse) -> Any:
    provider = self.backend.get_open_id_connect_provider(self._get_param("OpenIDConnectProviderArn"))
    client_id = self._get_param("ClientID")
    if client_id in provider.client_id_list:
        provider.client_id_list.remove(client_id)
    return EmptyResult()


def install() -> None:
    IAMBackend.create_open_id_connect_provider = _create  # type: ignore[method-assign]
    IamResponse.add_client_id_to_open_id_connect_provider = _add_client_id  # type: ignore[attr-defined]
    IamResponse.remove_client_id_from_open_id_connect_provider = _remove_client_id  # type: ignore[attr-defined]
