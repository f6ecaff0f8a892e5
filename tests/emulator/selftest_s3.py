"""Check of a running emulator's S3, as gpustack's remote state uses it (starts nothing itself).

    tests/emulator/.venv/bin/python tests/emulator/selftest_s3.py --endpoint http://127.0.0.1:PORT

Proves that conditional writes behave as on AWS: ``If-None-Match: *`` and ``If-Match`` on
PutObject and DeleteObject (moto 5.2.5), racing creates with exactly one winner
(ext/s3_conditional.py), injected 409 ``ConditionalRequestConflict`` and 403 ``AccessDenied``,
and per-service latency (ext/service_latency.py). Exits non-zero on the first failure; ends with
a moto reset.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-west-2"


def status_and_code(call, **kwargs) -> tuple[int, str | None]:
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]
    return 200, None


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}")


def http(endpoint: str, path: str):
    req = urllib.request.Request(endpoint + path, method="POST", data=b"")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    args = parser.parse_args()
    ep = args.endpoint
    s3 = boto3.client(
        "s3",
        endpoint_url=ep,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    bucket, key = "gpustack-selftest", "envs/dev.json"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})

    # PutObject If-None-Match: * (the lock, and the first state write).
    first = s3.put_object(Bucket=bucket, Key=key, Body=b"v1", IfNoneMatch="*")
    check(bool(first["ETag"]), "PutObject If-None-Match: * creates a missing key")
    check(
        status_and_code(s3.put_object, Bucket=bucket, Key=key, Body=b"v1b", IfNoneMatch="*")
        == (412, "PreconditionFailed"),
        "PutObject If-None-Match: * on an existing key: 412 PreconditionFailed",
    )
    check(s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"v1", "... and the object is unchanged")

    # PutObject If-Match (every later state write).
    second = s3.put_object(Bucket=bucket, Key=key, Body=b"v2", IfMatch=first["ETag"])
    check(second["ETag"] != first["ETag"], "PutObject If-Match: <current ETag> writes")
    check(
        status_and_code(s3.put_object, Bucket=bucket, Key=key, Body=b"v3", IfMatch=first["ETag"])
        == (412, "PreconditionFailed"),
        "PutObject If-Match: <stale ETag>: 412 PreconditionFailed",
    )
    check(s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"v2", "... and the object is unchanged")
    check(
        status_and_code(s3.put_object, Bucket=bucket, Key="absent.json", Body=b"x", IfMatch=first["ETag"])
        == (404, "NoSuchKey"),
        "PutObject If-Match on a missing key: 404 NoSuchKey",
    )

    # DeleteObject If-Match (releasing the lock, force-unlock).
    check(
        status_and_code(s3.delete_object, Bucket=bucket, Key=key, IfMatch=first["ETag"])
        == (412, "PreconditionFailed"),
        "DeleteObject If-Match: <stale ETag>: 412 PreconditionFailed",
    )
    check(s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"v2", "... and the object is still there")
    s3.delete_object(Bucket=bucket, Key=key, IfMatch=second["ETag"])
    check(
        status_and_code(s3.get_object, Bucket=bucket, Key=key) == (404, "NoSuchKey"),
        "DeleteObject If-Match: <current ETag> deletes",
    )

    # Racing creates: exactly one wins (moto alone lets several through).
    for round_ in range(5):
        lock_key = f"race-{round_}.json.lock"
        wins: list[int] = []

        def create(i: int) -> None:
            code, _ = status_and_code(s3.put_object, Bucket=bucket, Key=lock_key, Body=str(i).encode(), IfNoneMatch="*")
            if code == 200:
                wins.append(i)

        threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if len(wins) != 1:
            check(False, f"8 racing If-None-Match: * PUTs: exactly one wins (round {round_}: {wins})")
        stored = s3.get_object(Bucket=bucket, Key=lock_key)["Body"].read()
        if stored != str(wins[0]).encode():
            check(False, f"the stored lock is the winner's (round {round_})")
    check(True, "8 racing If-None-Match: * PUTs: exactly one wins, and its body is stored (5 rounds)")

    # Injected 409 ConditionalRequestConflict, then normal again.
    check(http(ep, "/_gpustack/s3/conflict?n=1") == {"remaining": 1}, "POST /_gpustack/s3/conflict?n=1")
    check(
        status_and_code(s3.put_object, Bucket=bucket, Key="c.json", Body=b"x", IfNoneMatch="*")
        == (409, "ConditionalRequestConflict"),
        "the next conditional write: 409 ConditionalRequestConflict",
    )
    check(
        status_and_code(s3.put_object, Bucket=bucket, Key="c.json", Body=b"x", IfNoneMatch="*")[0] == 200,
        "... and the one after it succeeds",
    )

    # Injected lost answer: the write lands, the answer is a 500 (only for the given key).
    # n=2: this client retries once (max_attempts 1), and the retry's answer is lost too.
    check(http(ep, "/_gpustack/s3/lost?n=2&key=l.json") == {"remaining": 2}, "POST /_gpustack/s3/lost?n=2&key=l.json")
    check(
        status_and_code(s3.put_object, Bucket=bucket, Key="other.json", Body=b"o", IfNoneMatch="*")[0] == 200,
        "a conditional write to another key is answered normally",
    )
    check(
        status_and_code(s3.put_object, Bucket=bucket, Key="l.json", Body=b"landed", IfNoneMatch="*")
        == (500, "InternalError"),
        "the next conditional write to l.json: 500 InternalError ...",
    )
    check(s3.get_object(Bucket=bucket, Key="l.json")["Body"].read() == b"landed", "... yet it landed")

    # Denied bucket.
    check(http(ep, f"/_gpustack/s3/deny?bucket={bucket}")["denied"] == [bucket], "POST /_gpustack/s3/deny")
    check(
        status_and_code(s3.get_object, Bucket=bucket, Key="c.json") == (403, "AccessDenied"),
        "GetObject on a denied bucket: 403 AccessDenied",
    )
    http(ep, f"/_gpustack/s3/deny?bucket={bucket}&off=1")
    check(status_and_code(s3.get_object, Bucket=bucket, Key="c.json")[0] == 200, "deny lifted with off=1")
    check(
        status_and_code(s3.get_object, Bucket="no-such-gpustack-bucket", Key="k") == (404, "NoSuchBucket"),
        "GetObject on a missing bucket: 404 NoSuchBucket",
    )

    # S3-only latency.
    check(http(ep, "/_gpustack/service-latency?service=s3&ms=150")["latency_ms"] == {"s3": 150}, "service-latency s3=150")
    t0 = time.monotonic()
    s3.get_object(Bucket=bucket, Key="c.json")
    check(time.monotonic() - t0 >= 0.15, "an S3 call waits the S3 latency")
    http(ep, "/_gpustack/service-latency?service=s3&ms=0")
    t0 = time.monotonic()
    s3.get_object(Bucket=bucket, Key="c.json")
    check(time.monotonic() - t0 < 0.15, "ms=0 removes it")

    urllib.request.urlopen(urllib.request.Request(ep + "/moto-api/reset", method="POST", data=b""), timeout=10)
    print("all S3 checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
