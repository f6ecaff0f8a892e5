//! The S3 state backend: the state is one object, read and written with
//! conditional requests so that no write is ever lost. Each write is
//! `PutObject If-Match: <the ETag last read or written>` (`If-None-Match: *` for the
//! first), so a state changed by anyone else since is never overwritten: the write
//! fails with [`S3Error::Changed`] and the caller keeps its copy elsewhere.
//! The lock object beside it lives in [`lock`]. Errors name the bucket and key in one
//! line; nothing here prints.

pub mod lock;

use std::sync::Mutex;

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;

/// Where a state object lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    pub key: String,
    pub region: String,
}

impl std::fmt::Display for S3Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.key)
    }
}

/// An S3 request that failed, said for an operator.
#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    #[error(
        "the S3 bucket `{bucket}` does not exist (state s3://{bucket}/{key}); create it (with versioning and default encryption), or fix the bucket name"
    )]
    NoBucket { bucket: String, key: String },
    #[error(
        "access denied to s3://{bucket}/{key} ({action}); gpustack needs s3:GetObject, s3:PutObject and s3:DeleteObject on the key and its .lock, and s3:ListBucket on the prefix (README, \"Remote state\")"
    )]
    Denied { bucket: String, key: String, action: &'static str },
    #[error(
        "the S3 bucket `{bucket}` is not in {region}{} (state s3://{bucket}/{key}); set region = \"…\" in [stack.backend] s3 = {{ … }}",
        actual.as_ref().map_or(String::new(), |r| format!(" but in {r}"))
    )]
    WrongRegion { bucket: String, key: String, region: String, actual: Option<String> },
    #[error(
        "s3://{bucket}/{key} was changed by someone else since this run read it (its ETag is not {expected}); nothing was overwritten"
    )]
    Changed { bucket: String, key: String, expected: String },
    #[error("{action} s3://{bucket}/{key} failed: {detail}")]
    Other { bucket: String, key: String, action: &'static str, detail: String },
}

/// What an SDK error says, without its types.
pub(crate) struct Failure {
    pub status: Option<u16>,
    pub code: Option<String>,
    pub message: Option<String>,
    /// `x-amz-bucket-region`, which S3 sends with a redirect to the bucket's region.
    pub bucket_region: Option<String>,
    pub detail: String,
}

impl Failure {
    pub fn of<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
        e: SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
    ) -> Failure {
        let status = e.raw_response().map(|r| r.status().as_u16());
        let bucket_region = e.raw_response().and_then(|r| r.headers().get("x-amz-bucket-region")).map(str::to_string);
        let (code, message) = (e.code().map(str::to_string), e.message().map(str::to_string));
        let detail = match (&code, &message, status) {
            (Some(c), Some(m), _) => format!("{c}: {m}"),
            (Some(c), None, _) => c.clone(),
            (None, _, Some(s)) => format!("HTTP {s}"),
            // No response at all (endpoint unreachable, DNS, TLS): the cause chain, one line, cut short.
            (None, _, None) => {
                let full = aws_sdk_s3::error::DisplayErrorContext(&e).to_string();
                full.replace('\n', " ").chars().take(300).collect()
            }
        };
        Failure { status, code, message, bucket_region, detail }
    }

    pub fn is(&self, code: &str, status: u16) -> bool {
        self.code.as_deref() == Some(code) || (self.code.is_none() && self.status == Some(status))
    }

    pub fn precondition_failed(&self) -> bool {
        self.is("PreconditionFailed", 412)
    }

    /// 409 `ConditionalRequestConflict`: another conditional write raced this one; retry.
    pub fn conflict(&self) -> bool {
        self.is("ConditionalRequestConflict", 409)
    }

    pub fn no_such_key(&self) -> bool {
        self.code.as_deref() == Some("NoSuchKey")
    }

    /// The error for an operator: the missing bucket, denied access and the wrong region
    /// get their own sentences; the rest says the action and AWS's code.
    pub fn into_error(self, action: &'static str, loc: &S3Location) -> S3Error {
        let (bucket, key) = (loc.bucket.clone(), loc.key.clone());
        let wrong_region = matches!(
            self.code.as_deref(),
            Some("PermanentRedirect" | "AuthorizationHeaderMalformed" | "IllegalLocationConstraintException")
        ) || self.status == Some(301);
        if self.code.as_deref() == Some("NoSuchBucket") {
            S3Error::NoBucket { bucket, key }
        } else if self.is("AccessDenied", 403) || self.code.as_deref() == Some("AllAccessDisabled") {
            S3Error::Denied { bucket, key, action }
        } else if wrong_region {
            let actual = self.bucket_region.or_else(|| self.message.as_deref().and_then(expected_region));
            S3Error::WrongRegion { bucket, key, region: loc.region.clone(), actual }
        } else {
            S3Error::Other { bucket, key, action, detail: self.detail }
        }
    }
}

/// The region in "the region 'us-east-1' is wrong; expecting 'eu-west-1'".
fn expected_region(message: &str) -> Option<String> {
    let rest = message.split("expecting '").nth(1)?;
    Some(rest.split('\'').next()?.to_string())
}

/// A client for `region`, from the SDK's standard chain. With an endpoint URL configured
/// (`AWS_ENDPOINT_URL`, an emulator or a private endpoint) requests use path-style
/// addresses, since `bucket.127.0.0.1` names no host.
pub async fn client(region: &str) -> aws_sdk_s3::Client {
    let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_string()))
        .load()
        .await;
    let path_style = conf.endpoint_url().is_some();
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&conf).force_path_style(path_style).build())
}

/// An object's body and ETag, or `None` when it does not exist.
pub(crate) async fn get(
    client: &aws_sdk_s3::Client,
    loc: &S3Location,
    key: &str,
) -> Result<Option<(Vec<u8>, String)>, Failure> {
    let out = match client.get_object().bucket(&loc.bucket).key(key).send().await {
        Ok(o) => o,
        Err(e) => {
            let f = Failure::of(e);
            return if f.no_such_key() { Ok(None) } else { Err(f) };
        }
    };
    let etag = out.e_tag().unwrap_or_default().to_string();
    let body = out.body.collect().await.map_err(|e| Failure {
        status: None,
        code: None,
        message: None,
        bucket_region: None,
        detail: format!("reading the object's body: {e}"),
    })?;
    Ok(Some((body.into_bytes().to_vec(), etag)))
}

/// The state object, with the ETag of the last read or write.
pub struct Store {
    client: aws_sdk_s3::Client,
    pub location: S3Location,
    etag: Mutex<Option<String>>,
}

/// How many times a write that raced another conditional write (409) is tried again.
const CONFLICT_RETRIES: u32 = 5;

impl Store {
    pub async fn connect(location: S3Location) -> Store {
        Store { client: client(&location.region).await, location, etag: Mutex::new(None) }
    }

    pub fn client(&self) -> &aws_sdk_s3::Client {
        &self.client
    }

    /// The state's bytes, or `None` when it does not exist yet; remembers the ETag.
    pub async fn read(&self) -> Result<Option<Vec<u8>>, S3Error> {
        let got = get(&self.client, &self.location, &self.location.key)
            .await
            .map_err(|f| f.into_error("reading", &self.location))?;
        let (body, etag) = got.map_or((None, None), |(b, e)| (Some(b), Some(e)));
        *self.etag.lock().unwrap_or_else(|p| p.into_inner()) = etag;
        Ok(body)
    }

    /// Writes the state only if it is still what this run last read or wrote.
    pub async fn write(&self, bytes: &[u8]) -> Result<(), S3Error> {
        let expected = self.etag.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let loc = &self.location;
        let mut attempt = 0;
        loop {
            let put = self
                .client
                .put_object()
                .bucket(&loc.bucket)
                .key(&loc.key)
                .content_type("application/json")
                .body(ByteStream::from(bytes.to_vec()));
            let put = match &expected {
                Some(etag) => put.if_match(etag),
                None => put.if_none_match("*"),
            };
            let f = match put.send().await {
                Ok(out) => {
                    *self.etag.lock().unwrap_or_else(|p| p.into_inner()) = out.e_tag().map(str::to_string);
                    return Ok(());
                }
                Err(e) => Failure::of(e),
            };
            if f.conflict() && attempt < CONFLICT_RETRIES {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
                continue;
            }
            // A PUT that landed while its answer was lost shows as a 412 on the SDK's retry, or
            // as a timeout or 5xx when every answer was lost: the object is then exactly what
            // we sent, and its ETag is the one to write against next.
            if let Ok(Some((body, etag))) = get(&self.client, loc, &loc.key).await
                && body == bytes
            {
                *self.etag.lock().unwrap_or_else(|p| p.into_inner()) = Some(etag);
                return Ok(());
            }
            // A 412 (or, for If-Match on an object deleted since, a 404) means the object is not
            // the one we last saw.
            if f.precondition_failed() || (expected.is_some() && f.no_such_key()) {
                return Err(S3Error::Changed {
                    bucket: loc.bucket.clone(),
                    key: loc.key.clone(),
                    expected: expected.unwrap_or_else(|| "absent".into()),
                });
            }
            return Err(f.into_error("writing", loc));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expected_region_is_read_from_the_message() {
        let m = "The authorization header is malformed; the region 'us-west-2' is wrong; expecting 'eu-central-1'";
        assert_eq!(expected_region(m).as_deref(), Some("eu-central-1"));
        assert_eq!(expected_region("no region here"), None);
    }

    #[test]
    fn errors_name_bucket_and_key_in_one_line() {
        let loc = S3Location { bucket: "b".into(), key: "envs/x.json".into(), region: "us-west-2".into() };
        let f = |code: &str, status| Failure {
            status: Some(status),
            code: Some(code.into()),
            message: None,
            bucket_region: Some("eu-west-1".into()),
            detail: code.into(),
        };
        for (code, status, want) in [
            ("NoSuchBucket", 404, "bucket `b` does not exist"),
            ("AccessDenied", 403, "access denied to s3://b/envs/x.json"),
            ("PermanentRedirect", 301, "is not in us-west-2 but in eu-west-1"),
            ("SlowDown", 503, "reading s3://b/envs/x.json failed: SlowDown"),
        ] {
            let text = f(code, status).into_error("reading", &loc).to_string();
            assert!(text.contains(want), "{text}");
            assert!(text.contains("envs/x.json") && !text.contains('\n'), "{text}");
        }
    }
}
