//! Waiting out IAM's eventual consistency on the calls that name a role or an OIDC provider
//! made moments before.
//!
//! IAM changes take a while to reach other services and IAM's own policy checks ("Changes
//! that I make are not always immediately visible", IAM User Guide, Troubleshoot IAM). Two
//! refusals follow, and the SDK retries neither (they are 400 client errors):
//! - EKS answers `InvalidParameterException` "Role provided in the request does not exist" to
//!   CreatePodIdentityAssociation / UpdatePodIdentityAssociation / CreateAddon / UpdateAddon
//!   naming a new role (hashicorp/terraform-provider-aws#34711, fixed by #34717, which wraps
//!   those calls in `RetryWhenIsAErrorMessageContains[*InvalidParameterException](…, "Role
//!   provided in the request does not exist")`; `internal/service/eks/addon.go` retries
//!   CreateAddon on InvalidParameterException "does not exist").
//! - IAM answers `MalformedPolicyDocument` "Invalid principal in policy" to CreateRole /
//!   UpdateAssumeRolePolicy whose trust names a principal made moments before
//!   (terraform-provider-aws `internal/service/iam/role.go`: `retryCreateRole` and the
//!   UpdateAssumeRolePolicy path retry on exactly that).
//!
//! Both calls failed without a change, so sending them again is safe. Like terraform (its
//! `propagationTimeout` is 2 minutes) this retries for about two minutes, with backoff.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::aws::AwsError;

/// How long a refusal is taken for propagation before it is reported.
pub const PROPAGATION: Duration = Duration::from_secs(120);

/// EKS's refusal of a role IAM has not propagated to it yet.
pub fn role_not_visible(e: &AwsError) -> bool {
    e.has_code("InvalidParameterException") && e.detail.contains("Role provided in the request does not exist")
}

/// IAM's refusal of a trust policy naming a principal it does not see yet.
pub fn principal_not_visible(e: &AwsError) -> bool {
    e.has_code("MalformedPolicyDocument") && e.detail.contains("Invalid principal in policy")
}

/// `call` again while it fails with what `not_ready` says is propagation, pausing 1 s, 2 s,
/// 4 s ... (at most 15 s) for at most [`PROPAGATION`]; then its last answer.
pub async fn retrying<T, Fut>(not_ready: fn(&AwsError) -> bool, call: impl FnMut() -> Fut) -> Result<T, AwsError>
where
    Fut: Future<Output = Result<T, AwsError>>,
{
    retrying_for(PROPAGATION, not_ready, call).await
}

async fn retrying_for<T, Fut>(
    within: Duration,
    not_ready: fn(&AwsError) -> bool,
    mut call: impl FnMut() -> Fut,
) -> Result<T, AwsError>
where
    Fut: Future<Output = Result<T, AwsError>>,
{
    let deadline = Instant::now() + within;
    let mut pause = Duration::from_secs(1);
    loop {
        match call().await {
            Err(e) if not_ready(&e) && Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(15));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn err(code: &str, detail: &str) -> AwsError {
        AwsError { operation: "CreateAddon", code: Some(code.into()), detail: detail.into() }
    }

    #[test]
    fn recognises_only_propagation() {
        assert!(role_not_visible(&err(
            "InvalidParameterException",
            "Role provided in the request does not exist: arn:aws:iam::1:role/x"
        )));
        assert!(!role_not_visible(&err("InvalidParameterException", "Addon version v1 is not supported")));
        assert!(!role_not_visible(&err("ResourceInUseException", "Role provided in the request does not exist")));
        assert!(principal_not_visible(&err(
            "MalformedPolicyDocument",
            "Invalid principal in policy: \"Federated\":\"arn:aws:iam::1:oidc-provider/x\""
        )));
        assert!(!principal_not_visible(&err("MalformedPolicyDocument", "Syntax errors in policy.")));
    }

    #[tokio::test]
    async fn retries_propagation_then_gives_up() {
        let calls = Cell::new(0);
        let out = retrying(role_not_visible, || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n < 2 {
                    Err(err("InvalidParameterException", "Role provided in the request does not exist"))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(out.unwrap(), 2);
        // Any other error is answered at once.
        calls.set(0);
        let out: Result<(), _> = retrying(role_not_visible, || {
            calls.set(calls.get() + 1);
            async { Err(err("InvalidParameterException", "Invalid role ARN")) }
        })
        .await;
        assert!(out.is_err() && calls.get() == 1);
        // Propagation that does not end in time is reported: 1 s pause, then the next (2 s)
        // would pass the deadline.
        calls.set(0);
        let out: Result<(), _> = retrying_for(Duration::from_millis(1500), principal_not_visible, || {
            calls.set(calls.get() + 1);
            async { Err(err("MalformedPolicyDocument", "Invalid principal in policy: x")) }
        })
        .await;
        assert!(out.is_err() && calls.get() == 2, "{}", calls.get());
    }
}
