//! AMIs from the public SSM parameters AWS publishes them under. Bottlerocket's are
//! `/aws/service/bottlerocket/<variant>/<arch>/<version>/image_id` (and `image_version`,
//! which says what `latest` is today).

use super::{AwsError, Ctx, ssm};

/// An AMI and the release it is.
pub struct Ami {
    pub id: String,
    /// The release ("1.32.0"); `latest` resolved, so it can be pinned.
    pub version: String,
}

/// The Bottlerocket AMI of `variant` ("aws-k8s-1.33") for `arch` ("x86_64", "arm64") at
/// `version` (a release, or "latest", resolved here). A name Bottlerocket does not publish
/// fails with `ParameterNotFound` and says which inputs to check.
pub async fn bottlerocket(ctx: &Ctx, variant: &str, arch: &str, version: &str) -> Result<Ami, AwsError> {
    let base = format!("/aws/service/bottlerocket/{variant}/{arch}/{version}");
    let get = |name: String| async move {
        ssm::parameter(ctx, &name).await.map_err(|e| {
            if !e.has_code("ParameterNotFound") {
                return e;
            }
            let detail = format!(
                "{}: Bottlerocket publishes no {name}; check `variant`, `architecture` and `bottlerocket_version`",
                e.detail
            );
            AwsError { detail, ..e }
        })
    };
    let id = get(format!("{base}/image_id")).await?;
    let version = if version == "latest" { get(format!("{base}/image_version")).await? } else { version.to_string() };
    Ok(Ami { id, version })
}
