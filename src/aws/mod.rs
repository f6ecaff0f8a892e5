//! Shared AWS mechanics: clients built from the SDK's standard chain (profiles,
//! environment, `AWS_ENDPOINT_URL`) in the stack's region, per-service
//! concurrency limits, error rendering and tag handling. Resource kinds use
//! these; nothing here knows a kind.

pub mod catalog;
pub mod eks;
pub mod tags;
pub mod wait;

use std::sync::Arc;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::ProvideErrorMetadata;
use tokio::sync::{Semaphore, SemaphorePermit};

/// An AWS service whose calls are limited together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Service {
    Ec2,
    Iam,
    Eks,
    Ssm,
    Quotas,
    Sqs,
    Events,
}

impl Service {
    pub fn name(self) -> &'static str {
        match self {
            Service::Ec2 => "ec2",
            Service::Iam => "iam",
            Service::Eks => "eks",
            Service::Ssm => "ssm",
            Service::Quotas => "quotas",
            Service::Sqs => "sqs",
            Service::Events => "events",
        }
    }

    /// Concurrent calls allowed per service. IAM throttles far earlier than EC2.
    fn default_limit(self) -> usize {
        match self {
            Service::Ec2 => 16,
            Service::Iam => 4,
            Service::Eks => 8,
            Service::Ssm => 8,
            Service::Quotas => 4,
            Service::Sqs => 8,
            // EventBridge's control plane allows few calls per second (PutRule, PutTargets).
            Service::Events => 4,
        }
    }
}

/// Everything a resource kind needs to talk to AWS for one stack.
#[derive(Clone)]
pub struct Ctx {
    pub ec2: aws_sdk_ec2::Client,
    pub iam: aws_sdk_iam::Client,
    pub eks: aws_sdk_eks::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub quotas: aws_sdk_servicequotas::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub events: aws_sdk_eventbridge::Client,
    pub stack: String,
    /// The instance catalog, read once per run and shared by every kind and rule.
    pub catalog: Arc<catalog::Catalog>,
    /// This stack's EKS clusters (names), listed once per run for the kinds that live in them.
    clusters: Arc<tokio::sync::Mutex<Option<Vec<aws_sdk_eks::types::Cluster>>>>,
    limits: Arc<[(Service, Semaphore); 7]>,
}

impl Ctx {
    pub async fn connect(stack: &str, region: &str) -> Ctx {
        // AWS_MAX_ATTEMPTS, the SDKs' own setting, lowers or raises the 8 attempts per call.
        let attempts =
            std::env::var("AWS_MAX_ATTEMPTS").ok().and_then(|v| v.trim().parse::<u32>().ok()).filter(|n| *n >= 1);
        let conf = aws_config::defaults(BehaviorVersion::latest())
            .region(aws_config::Region::new(region.to_string()))
            .retry_config(RetryConfig::adaptive().with_max_attempts(attempts.unwrap_or(8)))
            .load()
            .await;
        let limit = |s: Service| {
            let n = crate::settings::get().parallelism(s.name()).unwrap_or(s.default_limit());
            (s, Semaphore::new(n))
        };
        Ctx {
            ec2: aws_sdk_ec2::Client::new(&conf),
            iam: aws_sdk_iam::Client::new(&conf),
            eks: aws_sdk_eks::Client::new(&conf),
            ssm: aws_sdk_ssm::Client::new(&conf),
            quotas: aws_sdk_servicequotas::Client::new(&conf),
            sqs: aws_sdk_sqs::Client::new(&conf),
            events: aws_sdk_eventbridge::Client::new(&conf),
            stack: stack.to_string(),
            catalog: Arc::default(),
            clusters: Arc::default(),
            limits: Arc::new([
                limit(Service::Ec2),
                limit(Service::Iam),
                limit(Service::Eks),
                limit(Service::Ssm),
                limit(Service::Quotas),
                limit(Service::Sqs),
                limit(Service::Events),
            ]),
        }
    }

    /// The EKS clusters tagged for this stack, described; listed once per run (node groups
    /// and add-ons live in them) until [`Ctx::forget_reads`].
    pub async fn stack_clusters(&self) -> Result<Vec<aws_sdk_eks::types::Cluster>, AwsError> {
        let mut cache = self.clusters.lock().await;
        if let Some(c) = cache.as_ref() {
            return Ok(c.clone());
        }
        let pages = self.eks.list_clusters().into_paginator().send();
        let names = self.all_pages(Service::Eks, "ListClusters", pages, |p| p.clusters.unwrap_or_default()).await?;
        let mut ours = vec![];
        for name in names {
            let _p = self.permit(Service::Eks).await;
            let out = match self.eks.describe_cluster().name(&name).send().await.map_err(err("DescribeCluster")) {
                Ok(o) => o,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            if let Some(c) = out.cluster
                && c.tags().and_then(|t| t.get(tags::STACK)) == Some(&self.stack)
            {
                ours.push(c);
            }
        }
        *cache = Some(ours.clone());
        Ok(ours)
    }

    /// Drops what was read once per run, so the next refresh reads AWS again.
    pub async fn forget_reads(&self) {
        *self.clusters.lock().await = None;
    }

    /// A slot for one call to `service`. Hold it for the call only, never while waiting.
    pub async fn permit(&self, service: Service) -> SemaphorePermit<'_> {
        let sem = &self.limits.iter().find(|(s, _)| *s == service).map(|(_, sem)| sem).unwrap_or(&self.limits[0].1);
        // The semaphores are never closed, so acquire cannot fail.
        sem.acquire().await.unwrap_or_else(|_| unreachable!("semaphore closed"))
    }
}

/// A paginated call's pages, as the SDK's paginators stream them.
pub type Pages<O, E> = aws_smithy_async::future::pagination_stream::PaginationStream<
    Result<O, aws_sdk_ec2::error::SdkError<E, HttpResponse>>,
>;

impl Ctx {
    /// Every item of every page of a paginated call; each page request holds one slot of
    /// `service` (never the whole listing).
    pub async fn all_pages<O, E, T>(
        &self,
        service: Service,
        operation: &'static str,
        mut pages: Pages<O, E>,
        mut items: impl FnMut(O) -> Vec<T>,
    ) -> Result<Vec<T>, AwsError>
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let mut out = vec![];
        loop {
            let page = {
                let _p = self.permit(service).await;
                pages.next().await
            };
            match page {
                None => return Ok(out),
                Some(p) => out.extend(items(p.map_err(err(operation))?)),
            }
        }
    }
}

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
pub fn err<E>(operation: &'static str) -> impl FnOnce(aws_sdk_ec2::error::SdkError<E, HttpResponse>) -> AwsError
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

    /// True when AWS says the object does not exist (so a delete has nothing left to do).
    pub fn is_not_found(&self) -> bool {
        self.code.as_deref().is_some_and(|c| {
            c.ends_with(".NotFound")
                || c.ends_with(".Unknown")
                || c.ends_with("NotFoundException")
                || matches!(c, "NoSuchEntity" | "ResourceNotFoundException" | "ParameterNotFound")
        })
    }
}

/// `Ok(())` for a delete whose object is already gone.
pub fn gone_is_ok(r: Result<(), AwsError>) -> Result<(), AwsError> {
    match r {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}
