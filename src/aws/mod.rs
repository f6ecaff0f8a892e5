//! Shared AWS mechanics, written once: clients built from the SDK's standard chain
//! (profiles, environment, `AWS_ENDPOINT_URL`) in the stack's region, and the one way a
//! call is made ([`Ctx::call`]: a per-service concurrency slot, the request, a typed
//! error) and a listing read ([`Ctx::all_pages`]). Errors are in `error`, waiting in
//! `wait`, tags in `tags`, SSM in `ssm`, AMIs in `ami`, instance types in `catalog`.
//! Resource kinds use these; nothing here knows a kind.

pub mod ami;
pub mod catalog;
pub mod eks;
mod error;
pub mod iam;
pub mod ssm;
pub mod tags;
pub mod wait;

use std::future::Future;
use std::sync::Arc;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use tokio::sync::{Semaphore, SemaphorePermit};

pub use error::{Absent, AwsError, err};

/// A paginated call's pages, as the SDK's paginators stream them.
pub type Pages<O, E> =
    aws_smithy_async::future::pagination_stream::PaginationStream<Result<O, SdkError<E, HttpResponse>>>;

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
    SageMaker,
    Logs,
    AutoScaling,
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
            Service::SageMaker => "sagemaker",
            Service::Logs => "logs",
            Service::AutoScaling => "autoscaling",
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
            // SageMaker's control plane throttles per account (ThrottlingException); HyperPod
            // and training plans make few calls.
            Service::SageMaker => 4,
            // CloudWatch Logs: a few calls per cluster (its control-plane log group).
            Service::Logs => 4,
            // Self-managed node groups make few Auto Scaling calls.
            Service::AutoScaling => 4,
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
    pub sagemaker: aws_sdk_sagemaker::Client,
    pub logs: aws_sdk_cloudwatchlogs::Client,
    pub autoscaling: aws_sdk_autoscaling::Client,
    pub stack: String,
    /// The instance catalog, read once per run and shared by every kind and rule.
    pub catalog: Arc<catalog::Catalog>,
    /// This stack's EKS clusters (names), listed once per run for the kinds that live in them.
    clusters: Arc<tokio::sync::Mutex<Option<Vec<aws_sdk_eks::types::Cluster>>>>,
    /// The clusters (names) whose control-plane log group refresh reads: those the stack file
    /// or state give a `log_retention_days` (set by refresh). Others are never asked about, so
    /// a stack without the attribute needs no CloudWatch Logs permission.
    pub owned_log_groups: Arc<std::sync::RwLock<std::collections::BTreeSet<String>>>,
    /// The ids the state records, by kind (set by refresh): a kind whose batched read cannot
    /// find every object of the stack by its tags reads these directly (an `iam_role`
    /// imported from outside gpustack's path, which ListRoles' path prefix does not reach).
    pub recorded_ids: Arc<std::sync::RwLock<std::collections::BTreeMap<String, std::collections::BTreeSet<String>>>>,
    limits: Arc<[(Service, Semaphore); 10]>,
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
        Ctx::from_conf(stack, &conf)
    }

    /// A context on an SDK configuration built elsewhere (tests point one at the emulator).
    pub fn from_conf(stack: &str, conf: &aws_config::SdkConfig) -> Ctx {
        let limit = |s: Service| {
            let n = crate::settings::get().parallelism(s.name()).unwrap_or(s.default_limit());
            (s, Semaphore::new(n))
        };
        Ctx {
            ec2: aws_sdk_ec2::Client::new(conf),
            iam: aws_sdk_iam::Client::new(conf),
            eks: aws_sdk_eks::Client::new(conf),
            ssm: aws_sdk_ssm::Client::new(conf),
            quotas: aws_sdk_servicequotas::Client::new(conf),
            sqs: aws_sdk_sqs::Client::new(conf),
            events: aws_sdk_eventbridge::Client::new(conf),
            sagemaker: aws_sdk_sagemaker::Client::new(conf),
            logs: aws_sdk_cloudwatchlogs::Client::new(conf),
            autoscaling: aws_sdk_autoscaling::Client::new(conf),
            stack: stack.to_string(),
            catalog: Arc::default(),
            clusters: Arc::default(),
            owned_log_groups: Arc::default(),
            recorded_ids: Arc::default(),
            limits: Arc::new([
                limit(Service::Ec2),
                limit(Service::Iam),
                limit(Service::Eks),
                limit(Service::Ssm),
                limit(Service::Quotas),
                limit(Service::Sqs),
                limit(Service::Events),
                limit(Service::SageMaker),
                limit(Service::Logs),
                limit(Service::AutoScaling),
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
            let described = self.call(Service::Eks, "DescribeCluster", self.eks.describe_cluster().name(&name).send());
            let Some(out) = described.await.absent_ok()? else { continue };
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
    /// Calls take theirs in [`Ctx::call`] and [`Ctx::all_pages`]; `quota` still takes its own.
    pub async fn permit(&self, service: Service) -> SemaphorePermit<'_> {
        let sem = &self.limits.iter().find(|(s, _)| *s == service).map(|(_, sem)| sem).unwrap_or(&self.limits[0].1);
        // The semaphores are never closed, so acquire cannot fail.
        sem.acquire().await.unwrap_or_else(|_| unreachable!("semaphore closed"))
    }

    /// One AWS call, made the way every call is: a slot of `service` held for the call only,
    /// the request sent (the SDK retries it), and a failure turned into an [`AwsError`]
    /// named by `operation`, the API name that `Kind::actions` lists as `service:operation`.
    /// `request` is the SDK's `send()`, which sends nothing until awaited here.
    pub async fn call<T, E>(
        &self,
        service: Service,
        operation: &'static str,
        request: impl Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    ) -> Result<T, AwsError>
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let _slot = self.permit(service).await;
        request.await.map_err(err(operation))
    }

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
