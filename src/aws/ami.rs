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
    const CHECK: &str = "check `variant`, `architecture` and `bottlerocket_version`";
    let id = published(ctx, &format!("/aws/service/bottlerocket/{variant}/{arch}/{version}/image_id"), CHECK).await?;
    let version =
        if version == "latest" { latest_version(ctx, variant, arch, CHECK).await? } else { version.to_string() };
    Ok(Ami { id, version })
}

/// The release Bottlerocket publishes now as `latest` for `variant` and `arch`
/// ("1.57.0-0b6a2b38"). A variant it does not publish fails with `ParameterNotFound` and
/// `what_to_check`.
pub async fn latest_version(ctx: &Ctx, variant: &str, arch: &str, what_to_check: &str) -> Result<String, AwsError> {
    published(ctx, &format!("/aws/service/bottlerocket/{variant}/{arch}/latest/image_version"), what_to_check).await
}

/// A public parameter's value; one that is not published says so and what to check.
async fn published(ctx: &Ctx, name: &str, what_to_check: &str) -> Result<String, AwsError> {
    ssm::parameter(ctx, name).await.map_err(|e| {
        if !e.has_code("ParameterNotFound") {
            return e;
        }
        let detail = format!("{}: AWS publishes no {name}; {what_to_check}", e.detail);
        AwsError { detail, ..e }
    })
}

/// The EKS-published AMI id for a node of `ami_type` (an EKS `AMITypes` value) on Kubernetes
/// `k8s` ("1.33"): AL2023 from `/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/
/// <standard|nvidia|neuron>/recommended/image_id` (EKS UG `retrieve-ami-id`), Bottlerocket
/// from `/aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia][-fips]/<arch>/latest/image_id`
/// (EKS UG `retrieve-ami-id-bottlerocket`). For self-managed nodes, which EKS does not pick
/// an AMI for.
pub async fn eks_node(ctx: &Ctx, ami_type: &str, k8s: &str) -> Result<String, AwsError> {
    let name = eks_node_parameter(ami_type, k8s);
    published(ctx, &name, "check the template's `ami_type` and the cluster's version").await
}

/// The SSM parameter [`eks_node`] reads.
pub fn eks_node_parameter(ami_type: &str, k8s: &str) -> String {
    let arm = ami_type.contains("ARM_64");
    if ami_type.starts_with("BOTTLEROCKET_") {
        let mut variant = format!("aws-k8s-{k8s}");
        if ami_type.contains("NVIDIA") {
            variant.push_str("-nvidia");
        }
        if ami_type.ends_with("_FIPS") {
            variant.push_str("-fips");
        }
        let arch = if arm { "arm64" } else { "x86_64" };
        return format!("/aws/service/bottlerocket/{variant}/{arch}/latest/image_id");
    }
    let arch = if arm { "arm64" } else { "x86_64" };
    let flavour = if ami_type.contains("NVIDIA") {
        "nvidia"
    } else if ami_type.contains("NEURON") {
        "neuron"
    } else {
        "standard"
    };
    format!("/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{flavour}/recommended/image_id")
}

#[cfg(test)]
mod tests {
    use super::eks_node_parameter;

    #[test]
    fn node_ami_parameters_follow_the_published_paths() {
        assert_eq!(
            eks_node_parameter("AL2023_x86_64_NVIDIA", "1.33"),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
        );
        assert_eq!(
            eks_node_parameter("BOTTLEROCKET_ARM_64_NVIDIA_FIPS", "1.33"),
            "/aws/service/bottlerocket/aws-k8s-1.33-nvidia-fips/arm64/latest/image_id"
        );
    }
}
