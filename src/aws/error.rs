//! What a failed AWS call is: [`AwsError`] (operation, AWS error code, message), made from
//! the SDK's error without its debug structure, one line that says what to do for the
//! failures a person fixes, and [`Absent::absent_ok`] for calls where "not found" is an
//! answer. Nothing here makes a call.

use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};

/// An AWS call that failed, with the operation, the AWS error code and message. Its text is
/// one line that names the operation and, for the failures a person fixes (credentials,
/// network, permissions, region), says what to do.
#[derive(Debug, thiserror::Error)]
#[error("{operation} failed: {detail}{}", advice(self))]
pub struct AwsError {
    pub operation: &'static str,
    pub code: Option<String>,
    /// "Code: message" for an AWS error; otherwise what went wrong, in words.
    pub detail: String,
}

/// What to do about an AWS error code that is about the caller, not the request.
fn advice(e: &AwsError) -> String {
    let Some(code) = e.code.as_deref() else { return String::new() };
    let what = match code {
        "ExpiredToken" | "ExpiredTokenException" | "RequestExpired" | "TokenRefreshRequired" => {
            "the AWS credentials have expired: refresh them (aws sso login, or new STS credentials) and run again"
                .to_string()
        }
        "UnrecognizedClientException" | "InvalidClientTokenId" | "AuthFailure" | "SignatureDoesNotMatch"
        | "InvalidAccessKeyId" | "IncompleteSignature" | "MissingAuthenticationToken" => {
            "AWS rejected the credentials: check AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, and that the stack's region is enabled for the account".to_string()
        }
        "AccessDenied" | "AccessDeniedException" | "UnauthorizedOperation" | "UnauthorizedAccess" => format!(
            "the credentials may not call {}: grant it (`gpustack policy STACK` prints every permission gpustack needs)",
            e.operation
        ),
        "OptInRequired" => {
            "the account is not subscribed to this service in the stack's region: enable the region, or use another"
                .to_string()
        }
        _ => return String::new(),
    };
    format!("; {what}")
}

/// Turns an SDK error into an `AwsError` naming the operation. Nothing of the SDK's debug
/// structure reaches the text: a failure to send (no credentials, no network, a timeout)
/// becomes one sentence with what to do.
pub fn err<E>(operation: &'static str) -> impl FnOnce(SdkError<E, HttpResponse>) -> AwsError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    move |e| {
        let code = e.code().map(str::to_string);
        let detail = match (&code, e.message()) {
            (Some(c), Some(m)) => format!("{c}: {m}"),
            (Some(c), None) => c.clone(),
            // Not an AWS error body (a proxy's page, an endpoint without this API): say what came
            // back, not the whole response.
            _ => match e.raw_response().map(|r| r.status().as_u16()) {
                Some(status) => format!("HTTP {status} without an AWS error in the body (is the endpoint an AWS API?)"),
                None => not_sent(&e),
            },
        };
        AwsError { operation, code, detail: one_line(&detail) }
    }
}

/// Why a request got no answer, from the error and its sources (their `Display` texts only).
fn not_sent(e: &(dyn std::error::Error + 'static)) -> String {
    let mut chain = vec![];
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = cur {
        chain.push(x.to_string());
        cur = x.source();
    }
    let text = chain.join(": ").to_lowercase();
    let endpoint = match std::env::var("AWS_ENDPOINT_URL") {
        Ok(url) if !url.is_empty() => format!("the endpoint {url} (AWS_ENDPOINT_URL)"),
        _ => "AWS's endpoint".to_string(),
    };
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if has(&["credential", "no providers in chain", "identity", "auth scheme", "authscheme"]) {
        "no AWS credentials found; set AWS_PROFILE (after `aws sso login` or `aws configure`) or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or plan offline with `gpustack plan STACK --refresh=false`".to_string()
    } else if has(&["dns error", "failed to lookup address", "name or service not known", "no such host"]) {
        format!(
            "cannot resolve the host of {endpoint}; check the network (proxy, DNS) and that the stack's region is a real AWS region"
        )
    } else if has(&["timed out", "timeout", "deadline"]) {
        format!("no answer from {endpoint} in time; check the network (proxy, firewall) and retry")
    } else if has(&["connection refused", "connect error", "connection reset", "broken pipe", "io error", "network"]) {
        format!("cannot connect to {endpoint}; check the network (proxy, firewall) and AWS_ENDPOINT_URL if you set one")
    } else {
        // Something else kept the request from being sent: the first two causes, in words.
        let short: Vec<&str> = chain.iter().map(String::as_str).filter(|s| !s.is_empty()).take(3).collect();
        format!("the request could not be sent ({}); check the network and the AWS configuration", short.join(": "))
    }
}

/// AWS messages may hold line breaks; an error is one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl AwsError {
    /// AWS's message without the code (or, for a request that got no answer, what happened).
    pub fn message(&self) -> &str {
        match &self.code {
            Some(c) => self.detail.strip_prefix(c.as_str()).and_then(|m| m.strip_prefix(": ")).unwrap_or(&self.detail),
            None => &self.detail,
        }
    }

    /// The create's name (or CIDR) is held by an object that is not this address's: say so
    /// and what to do, keeping AWS's code and message.
    pub fn taken_by_other(self, what_to_do: &str) -> AwsError {
        AwsError {
            detail: format!("{}; the object holding it was not created by this resource: {what_to_do}", self.detail),
            ..self
        }
    }

    /// True when AWS answered with `code` ("InvalidGroup.Duplicate").
    pub fn has_code(&self, code: &str) -> bool {
        self.code.as_deref() == Some(code)
    }

    /// True when AWS says the object does not exist (so a delete has nothing left to do).
    /// SQS names an unknown queue `AWS.SimpleQueueService.NonExistentQueue` (its query-compatible
    /// code, which `aws-sdk-sqs` reads as `QueueDoesNotExist`), or `QueueDoesNotExist` in a JSON
    /// body without that header.
    pub fn is_not_found(&self) -> bool {
        self.code.as_deref().is_some_and(|c| {
            c.ends_with(".NotFound")
                || c.ends_with(".Unknown")
                || c.ends_with("NotFoundException")
                || matches!(
                    c,
                    "NoSuchEntity"
                        | "ResourceNotFoundException"
                        // SageMaker's code for an unknown cluster or training plan (botocore model).
                        | "ResourceNotFound"
                        | "ParameterNotFound"
                        | "AWS.SimpleQueueService.NonExistentQueue"
                        | "QueueDoesNotExist"
                        // EC2's code for an unknown NAT gateway, no dot: botocore's waiter model
                        // (ec2/2016-11-15/waiters-2.json) retries on it in NatGatewayAvailable,
                        // right after a create, and counts it as gone in NatGatewayDeleted.
                        | "NatGatewayNotFound"
                )
        })
    }
}

/// "Not found" as an answer rather than a failure: a delete whose object is already gone, a
/// describe of an object that may not exist (yet, or any more).
pub trait Absent<T> {
    /// `Ok(None)` when AWS says the object does not exist ([`AwsError::is_not_found`]).
    fn absent_ok(self) -> Result<Option<T>, AwsError>;
}

impl<T> Absent<T> for Result<T, AwsError> {
    fn absent_ok(self) -> Result<Option<T>, AwsError> {
        match self {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coded(code: &str) -> AwsError {
        AwsError { operation: "Op", code: Some(code.into()), detail: code.into() }
    }

    #[test]
    fn each_services_not_found_code_is_absence() {
        for code in [
            "InvalidGroup.NotFound",
            "NoSuchEntity",
            "ResourceNotFoundException",
            "ParameterNotFound",
            "AWS.SimpleQueueService.NonExistentQueue",
            "QueueDoesNotExist",
            "NatGatewayNotFound",
        ] {
            assert!(coded(code).is_not_found(), "{code}");
        }
        for code in ["AWS.SimpleQueueService.QueueDeletedRecently", "QueueAlreadyExists", "ResourceInUseException"] {
            assert!(!coded(code).is_not_found(), "{code}");
        }
    }
}
